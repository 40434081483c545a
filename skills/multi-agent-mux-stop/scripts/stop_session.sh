#!/usr/bin/env bash
# Stop a session's agent, keeping its conversation for resume.
# Thin wrapper: every argument goes to `mam session stop` unchanged; see ../SKILL.md.
set -euo pipefail
# shellcheck source=SCRIPTDIR/../../lib/mam-exec.sh
source "$(dirname "${BASH_SOURCE[0]}")/../../lib/mam-exec.sh"
exec "$MAM" session stop "$@"
