#!/usr/bin/env bash
# Record the orchestrator's own pane.
# Thin wrapper: every argument goes to `mam session onboard-orchestrator` unchanged; see ../SKILL.md.
set -euo pipefail
# shellcheck source=SCRIPTDIR/../../lib/mam-exec.sh
source "$(dirname "${BASH_SOURCE[0]}")/../../lib/mam-exec.sh"
exec "$MAM" session onboard-orchestrator "$@"
