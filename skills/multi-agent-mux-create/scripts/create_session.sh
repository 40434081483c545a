#!/usr/bin/env bash
# Start an agent in a new pane and register it as a session.
# Thin wrapper: every argument goes to `mam session create` unchanged; see ../SKILL.md.
set -euo pipefail
# shellcheck source=SCRIPTDIR/../../lib/mam-exec.sh
source "$(dirname "${BASH_SOURCE[0]}")/../../lib/mam-exec.sh"
exec "$MAM" session create "$@"
