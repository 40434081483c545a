#!/usr/bin/env bash
# Prepare an issue worktree (git worktree on a new branch) for a creator session.
# Thin wrapper: every argument goes to `mam worktree prepare` unchanged (`mam worktree prepare --help`).
set -euo pipefail
# shellcheck source=SCRIPTDIR/../../lib/mam-exec.sh
source "$(dirname "${BASH_SOURCE[0]}")/../../lib/mam-exec.sh"
exec "$MAM" worktree prepare "$@"
