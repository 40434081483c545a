#!/usr/bin/env bash
# Fire one tick of a routine now, decided by the node.
# Thin wrapper: every argument goes to `mam routine run` unchanged; see ../SKILL.md.
set -euo pipefail
# shellcheck source=SCRIPTDIR/../../lib/mam-exec.sh
source "$(dirname "${BASH_SOURCE[0]}")/../../lib/mam-exec.sh"
exec "$MAM" routine run "$@"
