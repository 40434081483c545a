#!/usr/bin/env bash
# Take out of a workspace exactly what deploy/install.sh added to it.
set -euo pipefail

usage() {
    cat <<'USAGE'
Usage: deploy/remove.sh [--purge [--discard-worktrees]] [--force] [WORKSPACE]

Remove from WORKSPACE (default: the current folder) what deploy/install.sh added, as recorded
in WORKSPACE/.mam/install-manifest.json:

  .venv                 deleted if install created it; if it was there before, only mam is
                        uninstalled from it
  .agents/skills/NAME/  the skill folders install copied; files you changed or added in them
                        are kept, and nothing else in .agents/ is touched
  .mam.env              deleted only if it is unchanged from .mam.env.example
  .gitignore            the lines install added are taken out (the file is deleted only if
                        install created it and nothing else is left in it)
  .mam/bin/mam          the launcher the printed `export PATH` line puts on PATH (kept if
                        you changed it); take that line out of your shell's startup file

Sessions whose agents still run are listed and the removal refused (their agents run mam
from the venv); with --force they are stopped first (`mam session stop`, conversations kept).
The workspace's embedded broker is stopped too (it runs from the venv). WORKSPACE/.mam/
(sessions, jobs, logs) is kept unless --purge is given; `remove.sh --purge` after a plain
remove.sh deletes it then. Your own files are never touched.

Session worktrees (git worktrees under WORKSPACE/.mam/, made by `mam session create
--worktree`) go with --purge: each is removed with `git worktree remove` and pruned, so git
keeps no entry for it; their branches are kept. A worktree holding work found nowhere else
(uncommitted or untracked files, or commits on no other branch, tag or remote branch) is
never deleted silently: they are listed and nothing is removed, unless --discard-worktrees
is given too. --force does not change that.

Options:
  --purge              also delete WORKSPACE/.mam/ (the session registry, job records, logs
                       and session worktrees)
  --discard-worktrees  with --purge: delete session worktrees even when they hold unsaved work
  --force              stop running sessions instead of refusing
  -h, --help           show this help
Environment:
  PYTHON       the Python used by the deploy helper (default: python3, else the venv's)

Exit codes: 0 removed; 1 nothing recorded to remove, sessions still running (no --force),
worktrees holding unsaved work (no --discard-worktrees), or a step failed; 2 bad usage.
USAGE
}

PROG=remove.sh
# shellcheck source=SCRIPTDIR/_common.sh
source "$(dirname "${BASH_SOURCE[0]}")/_common.sh"

PURGE=0
FORCE=0
DISCARD=0
ARGS=()
while [[ $# -gt 0 ]]; do
    case "$1" in
        -h | --help) usage; exit 0 ;;
        --purge) PURGE=1 ;;
        --force) FORCE=1 ;;
        --discard-worktrees) DISCARD=1 ;;
        --) shift; ARGS+=("$@"); break ;;
        -*) usage_error "unknown option: $1" ;;
        *) ARGS+=("$1") ;;
    esac
    shift
done
[[ "${#ARGS[@]}" -le 1 ]] || usage_error "expected at most one WORKSPACE"
[[ "$DISCARD" -eq 0 || "$PURGE" -eq 1 ]] || usage_error "--discard-worktrees goes with --purge"
resolve_workspace "${ARGS[0]:-$PWD}"

VENV="$WS/.venv"
MANIFEST="$WS/$MAM_MANIFEST_REL"

need_python() {
    find_python
    if [[ -z "$PY" ]]; then
        if [[ -x "$VENV/bin/python" ]]; then
            PY="$VENV/bin/python"
        else
            die "no Python found to read $1; set PYTHON=/path/to/python3"
        fi
    fi
}

# --purge deletes .mam/ and the session worktrees in it: refuse, before anything changes, while
# one holds work found nowhere else (unless --discard-worktrees).
check_worktrees() {
    local risky
    [[ "$PURGE" -eq 1 && "$DISCARD" -eq 0 && -d "$WS/.mam" ]] || return 0
    risky="$(run_helper worktrees "$WS")"
    [[ -n "$risky" ]] || return 0
    printf '%s: error: --purge would delete worktrees under %s/.mam holding work found nowhere else:\n' "$PROG" "$WS" >&2
    printf '%s\n' "$risky" >&2
    printf 'Nothing was removed. Commit, merge or copy that work first, or run again with --purge --discard-worktrees to delete them anyway.\n' >&2
    exit 1
}

# remove_worktrees: remove every worktree under .mam/ from its repository (git worktree remove + prune).
remove_worktrees() {
    local discard=()
    [[ "$DISCARD" -eq 0 ]] || discard=(--discard)
    if ! run_helper worktrees "$WS" --remove ${discard[@]+"${discard[@]}"}; then
        die "kept $WS/.mam: a worktree in it could not be removed, or now holds work found nowhere else (see above)"
    fi
}

if [[ ! -f "$MANIFEST" ]]; then
    if [[ "$PURGE" -eq 1 && -d "$WS/.mam" && ! -e "$VENV/bin/mam" ]]; then
        # A plain remove.sh ran before: only the state it kept is left to delete.
        need_python "$WS/.mam"
        check_worktrees
        remove_worktrees
        rm -rf -- "$WS/.mam"
        say "removed $WS/.mam (--purge; mam itself was already removed)"
        exit 0
    fi
    die "nothing to remove: $MANIFEST not found (was mam installed here with deploy/install.sh?)"
fi

need_python "$MANIFEST"
check_worktrees
say "removing mam from $WS"

# Agents of running sessions run mam from the venv about to go: list them, refuse, or stop them (--force).
if [[ -x "$VENV/bin/mam" && -f "$WS/.mam/agent-sessions.db" ]]; then
    # A status that cannot be read (a damaged registry, say) is said, not taken for "nothing runs".
    if ! status_json="$("$VENV/bin/mam" --workspace "$WS" session status --json 2>/dev/null)"; then
        warn "cannot list the sessions (mam session status failed); any agent of this workspace still running loses its mam"
        status_json="[]"
    fi
    running="$(printf '%s' "$status_json" | "$PY" -I -c 'import json, sys
for r in json.load(sys.stdin):
    if r["status"] in ("running", "starting") and r.get("pane_alive"):
        print(r["name"], r["agent"], sep="\t")')" || running=""
    if [[ -n "$running" ]]; then
        if [[ "$FORCE" -eq 0 ]]; then
            printf '%s: error: sessions still running in %s:\n' "$PROG" "$WS" >&2
            while IFS=$'\t' read -r name agent; do
                printf '  %s (%s)\n' "$name" "$agent" >&2
            done <<<"$running"
            printf 'Stop them first (mam session stop --session NAME), or run again with --force to stop them.\n' >&2
            exit 1
        fi
        while IFS=$'\t' read -r name agent; do
            if "$VENV/bin/mam" --workspace "$WS" session stop --session "$name" >/dev/null; then
                say "stopped session $name ($agent); its conversation is kept"
            else
                warn "could not stop session $name; its agent may still be running"
            fi
        done <<<"$running"
    fi
fi

# The embedded broker runs from the venv about to go: stop it while its mam is still there.
if [[ -x "$VENV/bin/mam" && -f "$WS/.mam/broker/broker.json" ]]; then
    "$VENV/bin/mam" --workspace "$WS" broker stop >/dev/null || warn "could not stop the embedded broker; see $WS/.mam/broker/"
fi

# --purge: the worktrees go from their repository first (while the helper's Python is surely there).
[[ "$PURGE" -eq 0 ]] || remove_worktrees

venv_state="$(run_helper get "$WS" venv)"
run_helper unapply "$MAM_CLONE_DIR" "$WS"

if [[ "$venv_state" == "created" ]]; then
    rm -rf -- "$VENV"
    say "removed $VENV"
elif [[ -x "$VENV/bin/python" ]]; then
    "$VENV/bin/python" -I -m pip uninstall --quiet --yes mam || warn "pip could not uninstall mam from $VENV"
    rm -f -- "$WS/$MAM_STAMP_REL"
    say "uninstalled mam from $VENV (the venv was there before install, so it stays)"
fi

rm -f -- "$MANIFEST"
if [[ "$PURGE" -eq 1 ]]; then
    rm -rf -- "$WS/.mam"
    say "removed $WS/.mam (--purge)"
else
    say "kept $WS/.mam (sessions, jobs, logs); --purge removes it"
fi
say "done"
