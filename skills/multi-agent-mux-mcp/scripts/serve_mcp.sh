#!/usr/bin/env bash
# MCP server of the workspace's mam (stdio, or --http with a bearer token).
# Thin wrapper: every argument goes to `mam mcp` unchanged; see ../SKILL.md.
set -euo pipefail
# shellcheck source=SCRIPTDIR/../../lib/mam-exec.sh
source "$(dirname "${BASH_SOURCE[0]}")/../../lib/mam-exec.sh"
exec "$MAM" mcp "$@"
