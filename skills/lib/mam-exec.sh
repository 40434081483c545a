# shellcheck shell=bash
# mam-exec.sh: sourced by every mam skill script; sets MAM to the mam executable to exec.
#
# Lookup order:
#   1. $MAM_BIN, when set (it must be an executable file);
#   2. the nearest .venv/bin/mam, walking up from the folder of the script that sourced this file
#      (installed skills live at <workspace>/.agents/skills/<skill>/scripts/, so this finds
#      <workspace>/.venv/bin/mam; in a clone of mam it finds the clone's dev venv);
#   3. mam on PATH.
# If none is found it prints how to install mam and returns 127 (the sourcing script, running
# under `set -e`, then exits 127).
#
# Workspace: a skill installed at <workspace>/.agents/skills/<skill>/scripts/ acts on <workspace>,
# wherever it is run from, by exporting MAM_WORKSPACE when it is not set already (an explicit
# --workspace still wins), provided <workspace> holds .mam.env or .mam/ (install.sh writes
# .mam.env). Skills anywhere else (e.g. a user-wide ~/.agents/skills/) leave the workspace to
# mam's own lookup.

# The script that sourced this file (this file itself when it is not sourced).
_mam_exec_origin="${BASH_SOURCE[1]:-${BASH_SOURCE[0]}}"

# Every skill call runs this, so it forks as little as bash allows: one subshell to resolve the
# script's folder, then parameter expansion only (no dirname, basename or further subshells).
_mam_exec_parent() {  # _mam_exec_up <- the parent folder of $1 ("/" for "/")
    _mam_exec_up="${1%/*}"
    [[ -n "$_mam_exec_up" ]] || _mam_exec_up=/
}

# shellcheck disable=SC2034  # MAM is read by the script that sources this file.
_mam_exec_find() {  # MAM <- the mam executable, else a message and 127
    local dir="$1" candidate
    if [[ -n "${MAM_BIN:-}" ]]; then
        if [[ -f "$MAM_BIN" && -x "$MAM_BIN" ]]; then
            MAM="$MAM_BIN"
            return 0
        fi
        printf 'mam skill: error: MAM_BIN is set to %q, which is not an executable file.\n' "$MAM_BIN" >&2
        printf 'Point MAM_BIN at the mam executable (e.g. <workspace>/.venv/bin/mam), or unset it.\n' >&2
        return 127
    fi
    while [[ -n "$dir" ]]; do
        candidate="${dir%/}/.venv/bin/mam"
        if [[ -f "$candidate" && -x "$candidate" ]]; then
            MAM="$candidate"
            return 0
        fi
        [[ "$dir" == "/" ]] && break
        _mam_exec_parent "$dir"
        dir="$_mam_exec_up"
    done
    if candidate="$(type -P mam)" && [[ -n "$candidate" ]]; then
        MAM="$candidate"
        return 0
    fi
    printf 'mam skill: error: cannot find the mam executable: MAM_BIN is not set, there is no .venv/bin/mam\n' >&2
    printf 'in %q or any folder above it, and mam is not on PATH.\n' "$_mam_exec_dir" >&2
    printf 'Install mam into the workspace from a clone of mam:  bash deploy/install.sh /path/to/workspace\n' >&2
    printf '(or set MAM_BIN to the mam executable).\n' >&2
    return 127
}

_mam_exec_workspace() {  # _mam_exec_ws <- the workspace of a skill installed at <ws>/.agents/skills/<skill>/scripts
    local scripts="$1" skill skills agents root
    _mam_exec_ws=""
    [[ -n "$scripts" ]] || return 0
    _mam_exec_parent "$scripts"
    skill="$_mam_exec_up"
    _mam_exec_parent "$skill"
    skills="$_mam_exec_up"
    _mam_exec_parent "$skills"
    agents="$_mam_exec_up"
    if [[ "${scripts##*/}" == scripts && "${skills##*/}" == skills && "${agents##*/}" == .agents ]]; then
        _mam_exec_parent "$agents"
        root="$_mam_exec_up"
        if [[ -f "$root/.mam.env" || -d "$root/.mam" ]]; then
            _mam_exec_ws="$root"
        fi
    fi
}

# The physical folder of the calling script (symlinks resolved, as `pwd -P` does).
case "$_mam_exec_origin" in
*/*) _mam_exec_dir="${_mam_exec_origin%/*}" ;;
*) _mam_exec_dir=. ;;
esac
_mam_exec_dir="$(CDPATH="" cd -- "${_mam_exec_dir:-/}" && pwd -P)" || _mam_exec_dir=""
_mam_exec_find "$_mam_exec_dir" || return 127
if [[ -z "${MAM_WORKSPACE:-}" ]]; then
    _mam_exec_workspace "$_mam_exec_dir"
    if [[ -n "$_mam_exec_ws" ]]; then
        export MAM_WORKSPACE="$_mam_exec_ws"
    fi
fi
unset _mam_exec_origin _mam_exec_dir _mam_exec_ws _mam_exec_up
