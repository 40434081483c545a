#!/usr/bin/env bash
# Resume a job (`mam job resume ID`), or with --all the whole workspace (`mam resume --all`); see ../SKILL.md.
# Thin wrapper: every argument goes to mam unchanged.
set -euo pipefail
# shellcheck source=SCRIPTDIR/../../lib/mam-exec.sh
source "$(dirname "${BASH_SOURCE[0]}")/../../lib/mam-exec.sh"
for arg in "$@"; do
    if [[ "$arg" == "--all" ]]; then
        exec "$MAM" resume "$@"
    fi
done
exec "$MAM" job resume "$@"
