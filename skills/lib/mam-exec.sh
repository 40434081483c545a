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

_mam_exec_find() {
    local origin="$1" dir candidate
    if [[ -n "${MAM_BIN:-}" ]]; then
        if [[ -f "$MAM_BIN" && -x "$MAM_BIN" ]]; then
            printf '%s\n' "$MAM_BIN"
            return 0
        fi
        printf 'mam skill: error: MAM_BIN is set to %q, which is not an executable file.\n' "$MAM_BIN" >&2
        printf 'Point MAM_BIN at the mam executable (e.g. <workspace>/.venv/bin/mam), or unset it.\n' >&2
        return 127
    fi
    dir="$(CDPATH="" cd -- "$(dirname -- "$origin")" && pwd -P)" || dir=""
    while [[ -n "$dir" ]]; do
        candidate="${dir%/}/.venv/bin/mam"
        if [[ -f "$candidate" && -x "$candidate" ]]; then
            printf '%s\n' "$candidate"
            return 0
        fi
        [[ "$dir" == "/" ]] && break
        dir="$(dirname -- "$dir")"
    done
    if candidate="$(type -P mam)" && [[ -n "$candidate" ]]; then
        printf '%s\n' "$candidate"
        return 0
    fi
    printf 'mam skill: error: cannot find the mam executable: MAM_BIN is not set, there is no .venv/bin/mam\n' >&2
    printf 'in %q or any folder above it, and mam is not on PATH.\n' "$(dirname -- "$origin")" >&2
    printf 'Install mam into the workspace from a clone of mam:  bash deploy/install.sh /path/to/workspace\n' >&2
    printf '(or set MAM_BIN to the mam executable).\n' >&2
    return 127
}

_mam_exec_workspace() {
    local scripts skill skills agents
    scripts="$(CDPATH="" cd -- "$(dirname -- "$1")" && pwd -P)" || return 0
    skill="$(dirname -- "$scripts")"
    skills="$(dirname -- "$skill")"
    agents="$(dirname -- "$skills")"
    if [[ "$(basename -- "$scripts")" == scripts && "$(basename -- "$skills")" == skills && "$(basename -- "$agents")" == .agents ]]; then
        local root
        root="$(dirname -- "$agents")"
        if [[ -f "$root/.mam.env" || -d "$root/.mam" ]]; then
            printf '%s\n' "$root"
        fi
    fi
}

# shellcheck disable=SC2034  # MAM is read by the script that sources this file.
MAM="$(_mam_exec_find "$_mam_exec_origin")" || return 127
if [[ -z "${MAM_WORKSPACE:-}" ]]; then
    _mam_exec_ws="$(_mam_exec_workspace "$_mam_exec_origin")"
    if [[ -n "$_mam_exec_ws" ]]; then
        export MAM_WORKSPACE="$_mam_exec_ws"
    fi
    unset _mam_exec_ws
fi
unset _mam_exec_origin
