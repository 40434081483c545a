#!/usr/bin/env bash
# Delegate a brief to a session and wait for the job's outcome.
# Thin wrapper: every argument goes to `mam job delegate` unchanged; see ../SKILL.md.
set -euo pipefail
# shellcheck source=SCRIPTDIR/../../lib/mam-exec.sh
source "$(dirname "${BASH_SOURCE[0]}")/../../lib/mam-exec.sh"
exec "$MAM" job delegate "$@"
