#!/usr/bin/env bash
# Start a new session from a copy of an existing session's conversation.
# Thin wrapper: every argument goes to `mam session fork` unchanged; see ../SKILL.md.
set -euo pipefail
# shellcheck source=SCRIPTDIR/../../lib/mam-exec.sh
source "$(dirname "${BASH_SOURCE[0]}")/../../lib/mam-exec.sh"
exec "$MAM" session fork "$@"
