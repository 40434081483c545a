#!/usr/bin/env bash
# Install mam from a source tree (a clone) into a workspace folder. install.sh and update.sh wrap it.
set -euo pipefail

usage() {
    cat <<'EOF'
Usage: install_mam.sh [--update] SRC DEST

Install mam from the source tree SRC (a clone) into the workspace folder DEST:

  DEST/.venv                  a venv with mam installed from SRC (not editable: DEST does not
                              depend on SRC staying where it is); the first line of its bin/mam
                              gets -S (Python skips `site`: mam/bin/mam finds the venv's packages)
  DEST/.agents/skills/NAME/   a copy of every folder in SRC/skills/
  DEST/.mam.env               written from SRC/.mam.env.example, only if missing; a legacy
                              DEST/.env is copied instead when there is one (the .env stays)
  DEST/.gitignore             .venv, .mam/ and .mam.env added once (existing content kept)
  DEST/.mam/bin/mam           the one file the printed `export PATH` line puts on PATH: it runs
                              the mam of the workspace it is used in ($MAM_WORKSPACE, else the
                              nearest folder at or above the current one with .venv/bin/mam),
                              else DEST's
  DEST/.mam/install-manifest.json
                              what was added, so remove.sh can take out exactly that

Running it again changes nothing when nothing changed: pip runs only when SRC's package
sources differ from the ones installed (their hash is kept in DEST/.venv/.mam-source-hash).

Options:
  --update     reinstall the package even if it looks current, and refresh the skills
               (.mam.env and .mam/ are kept, as always)
  -h, --help   show this help

Environment:
  PYTHON       the Python (>= 3.10) that creates the venv (default: python3)

Requires Python >= 3.10 with its venv module, and tmux; herdr is optional.
Exit codes: 0 installed; 1 a prerequisite is missing or a step failed; 2 bad usage.
EOF
}

PROG="${MAM_DEPLOY_PROG:-install_mam.sh}"
# shellcheck source=SCRIPTDIR/_common.sh
source "$(dirname "${BASH_SOURCE[0]}")/_common.sh"

UPDATE=0
ARGS=()
while [[ $# -gt 0 ]]; do
    case "$1" in
        -h | --help) usage; exit 0 ;;
        --update) UPDATE=1 ;;
        --) shift; ARGS+=("$@"); break ;;
        -*) usage_error "unknown option: $1" ;;
        *) ARGS+=("$1") ;;
    esac
    shift
done
[[ "${#ARGS[@]}" -eq 2 ]] || usage_error "expected SRC and DEST"

[[ -d "${ARGS[0]}" ]] || die "source folder does not exist: ${ARGS[0]}"
SRC="$(cd "${ARGS[0]}" && pwd -P)"
check_clone "$SRC"
if [[ ! -e "${ARGS[1]}" ]]; then
    check_prerequisites  # before creating anything
    mkdir -p -- "${ARGS[1]}"
    say "created the workspace folder ${ARGS[1]}"
fi
resolve_workspace "${ARGS[1]}"
say "installing mam from $SRC into $WS"
check_prerequisites

VENV="$WS/.venv"
MANIFEST="$WS/$MAM_MANIFEST_REL"
STAMP="$WS/$MAM_STAMP_REL"

# 1. The venv: ours if this script created it (recorded in the manifest on the first run).
recorded_venv=""
if [[ -f "$MANIFEST" ]]; then
    recorded_venv="$(run_helper get "$WS" venv)"
fi
venv_works() { [[ -x "$VENV/bin/python" ]] && "$VENV/bin/python" -I -c 'pass' >/dev/null 2>&1; }
if [[ -e "$VENV" ]] && ! venv_works; then
    if [[ "$recorded_venv" == "created" ]]; then
        warn "$VENV is broken; creating it again"
        rm -rf -- "$VENV"
    else
        die "$VENV exists but is not a working Python venv; move it away and run again"
    fi
fi
created_now=0
if [[ -e "$VENV" ]]; then
    venv_state="${recorded_venv:-existing}"
else
    say "creating $VENV with $PY (usually 3-10 s)"
    created_now=1
    started=$SECONDS
    if ! "$PY" -m venv -- "$VENV"; then
        rm -rf -- "$VENV"
        die "could not create the venv $VENV with $PY"
    fi
    say "venv created in $((SECONDS - started)) s"
    venv_state="created"
fi

if [[ ! -d "$WS/.mam" ]]; then
    mkdir -m 700 -- "$WS/.mam"
fi

# 2. The package: pip only when the installed sources differ from SRC's (or --update).
hash="$(run_helper source-hash "$SRC")"
installed_hash=""
if [[ -f "$STAMP" ]]; then
    installed_hash="$(<"$STAMP")"
fi
# The installed mam must come from the venv itself (not an editable link to some clone).
mam_in_venv() {
    "$VENV/bin/python" -I -c 'import os, sys, mam; sys.exit(0 if os.path.realpath(mam.__file__).startswith(os.path.realpath(sys.prefix) + os.sep) else 1)' >/dev/null 2>&1
}
if [[ "$UPDATE" -eq 0 && "$installed_hash" == "$hash" ]] && mam_in_venv; then
    say "mam in $VENV is up to date"
else
    stage="$(mktemp -d "${TMPDIR:-/tmp}/mam-src.XXXXXX")"
    trap 'rm -rf -- "$stage"' EXIT
    run_helper stage "$SRC" "$stage/mam" >/dev/null
    say "pip-installing mam and its dependencies into $VENV (usually 15-60 s; longer with a cold pip cache)"
    # pip's own output is ~100 lines of bars and notes: quiet everywhere (its errors still show); on a
    # terminal one line counts the seconds while it runs, and is cleared after.
    pip_args=(install --disable-pip-version-check --quiet)
    if [[ "$UPDATE" -eq 1 ]]; then
        pip_args+=(--upgrade)
    fi
    started=$SECONDS
    pip_rc=0
    if [[ -t 1 ]]; then
        "$VENV/bin/python" -I -m pip "${pip_args[@]}" "$stage/mam" &
        pip_pid=$!
        while kill -0 "$pip_pid" 2>/dev/null; do
            printf '\r%s: pip is working: %d s ' "$PROG" "$((SECONDS - started))"
            sleep 1
        done
        printf '\r\033[K'
        wait "$pip_pid" || pip_rc=$?
    else
        "$VENV/bin/python" -I -m pip "${pip_args[@]}" "$stage/mam" || pip_rc=$?
    fi
    if [[ "$pip_rc" -ne 0 ]]; then
        if [[ "$created_now" -eq 1 ]]; then
            rm -rf -- "$VENV"  # a half-made venv of ours: the next run starts clean
        fi
        die "pip could not install mam into $VENV (see pip's message above)"
    fi
    printf '%s\n' "$hash" >"$STAMP"
    say "pip-installed in $((SECONDS - started)) s"
fi

# 3. .mam.env: never overwritten; a legacy .env is carried over when there is no .mam.env.
if [[ -e "$WS/.mam.env" ]]; then
    env_from="kept"
elif [[ -f "$WS/.env" ]]; then
    (umask 077 && cp -- "$WS/.env" "$WS/.mam.env")
    env_from=".env"
    say "copied the legacy .env to .mam.env (.env is left as it was)"
else
    write_env_from_example "$SRC" "$WS"
    env_from="example"
    say "wrote .mam.env from .mam.env.example: every key commented out at its default; uncomment what you change"
fi

# 4. Skills, .gitignore, -S in .venv/bin/mam and the manifest (each file written only when its content changes).
run_helper apply "$SRC" "$WS" --venv "$venv_state" --source-hash "$hash" --env-from "$env_from"

version="$("$VENV/bin/mam" --version 2>/dev/null)" || die "$VENV/bin/mam does not run; try deploy/update.sh $WS"
say "done: $version in $VENV"
say "to run mam as \`mam\`, add this line to your shell's startup file (~/.bashrc, ~/.zshrc):"
printf '    export PATH=%q:"$PATH"\n' "$WS/.mam/bin"
say "(that folder holds only mam; in any workspace made with install.sh it runs that workspace's own mam)"
say "no agent CLI yet? \`mam demo\` shows demo agents doing real jobs (no LLM needed)"
say "next, as the README's \"Your first hour with a real agent\" goes: cd $(printf '%q' "$WS") && mam doctor"
