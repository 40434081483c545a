#!/usr/bin/env bash
# Remove a routine and its receipts.
# Thin wrapper: every argument goes to `mam routine remove` unchanged; see ../SKILL.md.
set -euo pipefail
# shellcheck source=SCRIPTDIR/../../lib/mam-exec.sh
source "$(dirname "${BASH_SOURCE[0]}")/../../lib/mam-exec.sh"
exec "$MAM" routine remove "$@"
