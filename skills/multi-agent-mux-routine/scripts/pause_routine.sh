#!/usr/bin/env bash
# Pause a routine: its ticks are skipped (reason paused).
# Thin wrapper: every argument goes to `mam routine pause` unchanged; see ../SKILL.md.
set -euo pipefail
# shellcheck source=SCRIPTDIR/../../lib/mam-exec.sh
source "$(dirname "${BASH_SOURCE[0]}")/../../lib/mam-exec.sh"
exec "$MAM" routine pause "$@"
