#!/usr/bin/env bash
# Plan, implement and review a task until every reviewer passes.
# Thin wrapper: every argument goes to `mam loop` unchanged; see ../SKILL.md.
set -euo pipefail
# shellcheck source=SCRIPTDIR/../../lib/mam-exec.sh
source "$(dirname "${BASH_SOURCE[0]}")/../../lib/mam-exec.sh"
exec "$MAM" loop "$@"
