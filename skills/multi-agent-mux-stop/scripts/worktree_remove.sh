#!/usr/bin/env bash
# Remove an issue worktree, only if it and its submodules are clean.
# Thin wrapper: every argument goes to `mam worktree remove` unchanged (`mam worktree remove --help`).
set -euo pipefail
# shellcheck source=SCRIPTDIR/../../lib/mam-exec.sh
source "$(dirname "${BASH_SOURCE[0]}")/../../lib/mam-exec.sh"
exec "$MAM" worktree remove "$@"
