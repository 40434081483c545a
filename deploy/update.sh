#!/usr/bin/env bash
# Reinstall mam from this clone into a workspace and refresh its skills; keep .mam.env and .mam/.
set -euo pipefail

usage() {
    cat <<'USAGE'
Usage: deploy/update.sh [WORKSPACE]

Update the mam installed in WORKSPACE (default: the current folder) from the clone this script
lives in: reinstall the package into WORKSPACE/.venv and refresh WORKSPACE/.agents/skills/
(skills no longer in the clone are removed; files you changed in them are kept).
WORKSPACE/.mam.env and WORKSPACE/.mam/ are kept as they are.

Options:
  -h, --help   show this help
Environment:
  PYTHON       the Python (>= 3.10) used by the deploy helpers (default: python3)

Exit codes: 0 updated; 1 mam is not installed there, or a step failed; 2 bad usage.
USAGE
}

case "${1:-}" in
    -h | --help) usage; exit 0 ;;
    -*) printf 'update.sh: error: unknown option: %s\n(see update.sh --help)\n' "$1" >&2; exit 2 ;;
esac
if [[ $# -gt 1 ]]; then
    printf 'update.sh: error: expected at most one WORKSPACE\n(see update.sh --help)\n' >&2
    exit 2
fi

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd -P)"
ws="${1:-$PWD}"
if [[ ! -f "$ws/.mam/install-manifest.json" && ! -x "$ws/.venv/bin/mam" ]]; then
    printf 'update.sh: error: mam is not installed in %s; run deploy/install.sh %s first\n' "$ws" "$ws" >&2
    exit 1
fi
MAM_DEPLOY_PROG=update.sh exec "$here/install_mam.sh" --update -- "$here/.." "$ws"
