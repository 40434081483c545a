#!/usr/bin/env bash
# Read-only snapshot of every session.
# Thin wrapper: every argument goes to `mam session status` unchanged; see ../SKILL.md.
set -euo pipefail
# shellcheck source=SCRIPTDIR/../../lib/mam-exec.sh
source "$(dirname "${BASH_SOURCE[0]}")/../../lib/mam-exec.sh"
exec "$MAM" session status "$@"
