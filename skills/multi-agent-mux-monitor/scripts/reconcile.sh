#!/usr/bin/env bash
# The workspace's reconciler: repairs registry drift and closes orphaned jobs.
# Thin wrapper: every argument goes to `mam monitor` unchanged; see ../SKILL.md.
set -euo pipefail
# shellcheck source=SCRIPTDIR/../../lib/mam-exec.sh
source "$(dirname "${BASH_SOURCE[0]}")/../../lib/mam-exec.sh"
exec "$MAM" monitor "$@"
