#!/usr/bin/env bash
# List the routines, their next tick and last receipt (starts nothing).
# Thin wrapper: every argument goes to `mam routine list` unchanged; see ../SKILL.md.
set -euo pipefail
# shellcheck source=SCRIPTDIR/../../lib/mam-exec.sh
source "$(dirname "${BASH_SOURCE[0]}")/../../lib/mam-exec.sh"
exec "$MAM" routine list "$@"
