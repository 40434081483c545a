#!/usr/bin/env bash
# Resume a routine from its next tick after now.
# Thin wrapper: every argument goes to `mam routine resume` unchanged; see ../SKILL.md.
set -euo pipefail
# shellcheck source=SCRIPTDIR/../../lib/mam-exec.sh
source "$(dirname "${BASH_SOURCE[0]}")/../../lib/mam-exec.sh"
exec "$MAM" routine resume "$@"
