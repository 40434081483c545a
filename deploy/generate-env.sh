#!/usr/bin/env bash
# Write WORKSPACE/.mam.env from this clone's .mam.env.example.
set -euo pipefail

usage() {
    cat <<'USAGE'
Usage: deploy/generate-env.sh [--force] [WORKSPACE]

Create WORKSPACE/.mam.env (default WORKSPACE: the current folder) from the clone's
.mam.env.example, which documents every setting with its default, each commented out (so
`mam config` shows as set in .mam.env only the keys you uncomment). An existing .mam.env is
left alone unless --force is given.

Options:
  --force      overwrite an existing .mam.env; its old content is kept in .mam.env.bak
               (replacing an older .mam.env.bak)
  -h, --help   show this help

The file is created with mode 0600: it may hold MQTT_PASSWORD and MAM_DISPATCH_SECRET.
Exit codes: 0 written or kept; 1 a step failed; 2 bad usage.
USAGE
}

PROG=generate-env.sh
# shellcheck source=SCRIPTDIR/_common.sh
source "$(dirname "${BASH_SOURCE[0]}")/_common.sh"

FORCE=0
ARGS=()
while [[ $# -gt 0 ]]; do
    case "$1" in
        -h | --help) usage; exit 0 ;;
        --force) FORCE=1 ;;
        --) shift; ARGS+=("$@"); break ;;
        -*) usage_error "unknown option: $1" ;;
        *) ARGS+=("$1") ;;
    esac
    shift
done
[[ "${#ARGS[@]}" -le 1 ]] || usage_error "expected at most one WORKSPACE"
resolve_workspace "${ARGS[0]:-$PWD}"

EXAMPLE="$MAM_CLONE_DIR/.mam.env.example"
TARGET="$WS/.mam.env"
[[ -f "$EXAMPLE" ]] || die "no .mam.env.example in $MAM_CLONE_DIR"

if [[ -e "$TARGET" ]]; then
    if [[ "$FORCE" -eq 0 ]]; then
        say "$TARGET exists; kept it (--force overwrites it and keeps a .mam.env.bak)"
        exit 0
    fi
    if cmp -s -- "$EXAMPLE" "$TARGET"; then
        say "$TARGET is already the same as the example; nothing to do"
        exit 0
    fi
    (umask 077 && cp -p -- "$TARGET" "$WS/.mam.env.bak")
    chmod 600 -- "$WS/.mam.env.bak"
    write_env_from_example "$MAM_CLONE_DIR" "$WS"
    say "wrote $TARGET from the example; the old one is in $WS/.mam.env.bak"
else
    write_env_from_example "$MAM_CLONE_DIR" "$WS"
    say "wrote $TARGET from the example (edit it to configure mam)"
fi
