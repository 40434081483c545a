#!/usr/bin/env bash
# Pause a job (`mam job pause ID`), or with --all the whole workspace (`mam pause --all`); see ../SKILL.md.
# Thin wrapper: every argument goes to mam unchanged.
set -euo pipefail
# shellcheck source=SCRIPTDIR/../../lib/mam-exec.sh
source "$(dirname "${BASH_SOURCE[0]}")/../../lib/mam-exec.sh"
for arg in "$@"; do
    if [[ "$arg" == "--all" ]]; then
        exec "$MAM" pause "$@"
    fi
done
exec "$MAM" job pause "$@"
