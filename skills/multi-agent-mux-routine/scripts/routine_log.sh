#!/usr/bin/env bash
# Show a routine's receipts, newest first.
# Thin wrapper: every argument goes to `mam routine log` unchanged; see ../SKILL.md.
set -euo pipefail
# shellcheck source=SCRIPTDIR/../../lib/mam-exec.sh
source "$(dirname "${BASH_SOURCE[0]}")/../../lib/mam-exec.sh"
exec "$MAM" routine log "$@"
