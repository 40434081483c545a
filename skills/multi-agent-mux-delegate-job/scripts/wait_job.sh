#!/usr/bin/env bash
# Follow a job to its end: exits with its exit code; see ../SKILL.md (`mam job wait`).
# Thin wrapper: every argument goes to `mam job wait` unchanged.
set -euo pipefail
# shellcheck source=SCRIPTDIR/../../lib/mam-exec.sh
source "$(dirname "${BASH_SOURCE[0]}")/../../lib/mam-exec.sh"
exec "$MAM" job wait "$@"
