#!/usr/bin/env bash
# Install mam from this clone into a workspace folder (default: the current folder).
set -euo pipefail

usage() {
    cat <<'USAGE'
Usage: deploy/install.sh [WORKSPACE]

Install mam from the clone this script lives in into WORKSPACE (default: the current folder;
created if missing, once the prerequisites are met):
a venv at WORKSPACE/.venv with mam in it (its bin/mam starts Python with -S: no `site`
step), the skills in WORKSPACE/.agents/skills/, a
WORKSPACE/.mam.env from .mam.env.example (every key commented out at its default; only if
missing; a legacy .env is copied instead),
.venv, .mam/ and .mam.env in WORKSPACE/.gitignore, and WORKSPACE/.mam/bin/mam, the one file
the `export PATH` line it prints puts on PATH (it runs the mam of the workspace it is used in:
$MAM_WORKSPACE's, else the nearest folder at or above the current one with .venv/bin/mam, else
WORKSPACE's; never the venv's python3 or pip). What it adds is recorded in
WORKSPACE/.mam/install-manifest.json so deploy/remove.sh can take out exactly that.

It is safe to run again: nothing changes when nothing changed.

Options:
  -h, --help   show this help
Environment:
  PYTHON       the Python (>= 3.10) that creates the venv (default: python3). Agents start mam
               for every event: a build with PGO and LTO (a distribution's, e.g. Debian's
               /usr/bin/python3) costs each start 15-30 % less CPU than a default pyenv build.

Requires Python >= 3.10 (with venv) and tmux; herdr is optional.
See also: deploy/update.sh, deploy/remove.sh, deploy/generate-env.sh, deploy/install_mam.sh.
USAGE
}

case "${1:-}" in
    -h | --help) usage; exit 0 ;;
    -*) printf 'install.sh: error: unknown option: %s\n(see install.sh --help)\n' "$1" >&2; exit 2 ;;
esac
if [[ $# -gt 1 ]]; then
    printf 'install.sh: error: expected at most one WORKSPACE\n(see install.sh --help)\n' >&2
    exit 2
fi

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd -P)"
MAM_DEPLOY_PROG=install.sh exec "$here/install_mam.sh" -- "$here/.." "${1:-$PWD}"
