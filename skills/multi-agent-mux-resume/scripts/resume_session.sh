#!/usr/bin/env bash
# Relaunch a stopped session's conversation.
# Thin wrapper: every argument goes to `mam session resume` unchanged; see ../SKILL.md.
set -euo pipefail
# shellcheck source=SCRIPTDIR/../../lib/mam-exec.sh
source "$(dirname "${BASH_SOURCE[0]}")/../../lib/mam-exec.sh"
exec "$MAM" session resume "$@"
