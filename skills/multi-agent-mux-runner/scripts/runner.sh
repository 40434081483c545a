#!/usr/bin/env bash
# Serve remote jobs for this host's sessions.
# Thin wrapper: every argument goes to `mam runner` unchanged; see ../SKILL.md.
set -euo pipefail
# shellcheck source=SCRIPTDIR/../../lib/mam-exec.sh
source "$(dirname "${BASH_SOURCE[0]}")/../../lib/mam-exec.sh"
exec "$MAM" runner "$@"
