#!/usr/bin/env bash
# Delegate the same brief to several sessions at once and aggregate their results.
# Thin wrapper: every argument goes to `mam job fanout` unchanged; see ../SKILL.md.
set -euo pipefail
# shellcheck source=SCRIPTDIR/../../lib/mam-exec.sh
source "$(dirname "${BASH_SOURCE[0]}")/../../lib/mam-exec.sh"
exec "$MAM" job fanout "$@"
