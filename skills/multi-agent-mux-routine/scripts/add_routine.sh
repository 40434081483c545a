#!/usr/bin/env bash
# Add a routine the node fires on a schedule, on demand or on a signed webhook.
# Thin wrapper: every argument goes to `mam routine add` unchanged; see ../SKILL.md.
set -euo pipefail
# shellcheck source=SCRIPTDIR/../../lib/mam-exec.sh
source "$(dirname "${BASH_SOURCE[0]}")/../../lib/mam-exec.sh"
exec "$MAM" routine add "$@"
