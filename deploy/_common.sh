# Shared by mam's deploy scripts: messages, the prerequisite checks, paths. Sourced, never run.
# shellcheck shell=bash disable=SC2034  # the variables are for the scripts that source this

MAM_DEPLOY_DIR="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd -P)"
MAM_CLONE_DIR="$(cd "$MAM_DEPLOY_DIR/.." && pwd -P)"
MAM_HELPER="$MAM_DEPLOY_DIR/_deploy.py"
MAM_MANIFEST_REL=".mam/install-manifest.json"
MAM_STAMP_REL=".venv/.mam-source-hash"
PROG="${PROG:-${0##*/}}"

say() { printf '%s: %s\n' "$PROG" "$*"; }
warn() { printf '%s: warning: %s\n' "$PROG" "$*" >&2; }
die() {
    printf '%s: error: %s\n' "$PROG" "$1" >&2
    exit "${2:-1}"
}

# usage_error MESSAGE: a bad command line (exit 2), with a pointer to --help.
usage_error() {
    printf '%s: error: %s\n(see %s --help)\n' "$PROG" "$1" "$PROG" >&2
    exit 2
}

# find_python: set PY to $PYTHON (default python3), checked to be Python >= 3.10 with venv.
# Collects problems in MISSING instead of failing, so one run lists everything to install.
MISSING=()
find_python() {
    local want="${PYTHON:-python3}" version rc
    PY=""
    if ! command -v "$want" >/dev/null 2>&1; then
        MISSING+=("Python >= 3.10 was not found (looked for '$want'). Install it (Debian/Ubuntu: sudo apt-get install python3 python3-venv; Fedora: sudo dnf install python3; macOS: brew install python) or point PYTHON at one: PYTHON=/path/to/python3 $PROG ...")
        return 0
    fi
    want="$(command -v "$want")"
    rc=0
    version="$("$want" -c 'import sys; print("%d.%d.%d" % sys.version_info[:3]); sys.exit(0 if sys.version_info >= (3, 10) else 3)' 2>/dev/null)" || rc=$?
    if [[ "$rc" -ne 0 ]]; then
        MISSING+=("Python >= 3.10 is required, but $want is ${version:-not a working Python}. Install a newer one and run again with PYTHON=/path/to/python3.10-or-later.")
        return 0
    fi
    if ! "$want" -c 'import venv, ensurepip' >/dev/null 2>&1; then
        MISSING+=("$want ($version) has no working venv module. Install it (Debian/Ubuntu: sudo apt-get install python3-venv, or python${version%.*}-venv).")
        return 0
    fi
    PY="$want"
}

# check_prerequisites: Python (as above) and tmux are required; herdr is optional.
PREREQUISITES_CHECKED=0
check_prerequisites() {
    [[ "$PREREQUISITES_CHECKED" -eq 0 ]] || return 0  # once per run: every note is said once
    PREREQUISITES_CHECKED=1
    find_python
    if ! command -v tmux >/dev/null 2>&1; then
        MISSING+=("tmux was not found on PATH; mam runs agents in tmux panes. Install it (Debian/Ubuntu: sudo apt-get install tmux; Fedora: sudo dnf install tmux; macOS: brew install tmux) and run again.")
    fi
    if [[ "${#MISSING[@]}" -gt 0 ]]; then
        printf '%s: error: missing prerequisites:\n' "$PROG" >&2
        printf '  - %s\n' "${MISSING[@]}" >&2
        exit 1
    fi
    if ! command -v "${HERDR_BIN:-herdr}" >/dev/null 2>&1; then
        say "note: herdr not found (optional: only needed for --backend herdr)"
    fi
}

# resolve_workspace DIR: set WS to the absolute, existing workspace folder.
resolve_workspace() {
    local dir="$1"
    [[ -n "$dir" ]] || usage_error "no workspace folder given"
    [[ -d "$dir" ]] || die "workspace folder does not exist: $dir (create it first)"
    WS="$(cd "$dir" && pwd -P)"
}

# check_clone DIR: DIR must be a mam source tree.
check_clone() {
    local dir="$1"
    [[ -f "$dir/pyproject.toml" && -d "$dir/mam" ]] || die "not a mam source tree (no pyproject.toml and mam/): $dir"
    [[ -f "$dir/.mam.env.example" ]] || die "no .mam.env.example in $dir (regenerate it: python -m mam config --example > .mam.env.example)"
}

# write_env_from_example SRC WS: write WS/.mam.env (mode 0600) from the clone's example, atomically.
write_env_from_example() {
    local example="$1/.mam.env.example" target="$2/.mam.env" tmp
    [[ -f "$example" ]] || die "no .mam.env.example in $1"
    tmp="$(mktemp "$2/.mam.env.XXXXXX")"
    cat -- "$example" >"$tmp"
    chmod 600 "$tmp"
    mv -f -- "$tmp" "$target"
}

# run_helper ARGS...: the file bookkeeping helper, with the Python found above (isolated mode).
run_helper() {
    "$PY" -I "$MAM_HELPER" "$@"
}
