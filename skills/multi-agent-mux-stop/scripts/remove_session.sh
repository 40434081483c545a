#!/usr/bin/env bash
# Remove a stopped (or, with --force, running) session so its name is free; its job history is kept.
# Thin wrapper: every argument goes to `mam session remove` unchanged; see ../SKILL.md.
set -euo pipefail
# shellcheck source=SCRIPTDIR/../../lib/mam-exec.sh
source "$(dirname "${BASH_SOURCE[0]}")/../../lib/mam-exec.sh"
exec "$MAM" session remove "$@"
