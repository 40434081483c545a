"""The bearer token `mam mcp --http` requires: MAM_MCP_TOKEN, else `.mam/mcp-token` (0600), made on first use."""

from __future__ import annotations

import os
import secrets
import stat

from mam.errors import ConfigError
from mam.settings import Settings
from mam.util.fs import atomic_write
from mam.workspace import Workspace

TOKEN_FILE = "mcp-token"


def server_token(ws: Workspace, settings: Settings) -> tuple[str, str]:
    """(token, where it came from). The token itself is never printed or logged."""
    given = settings.mcp_token.strip()
    if given:
        return given, "MAM_MCP_TOKEN"
    path = ws.state / TOKEN_FILE
    if not path.exists():
        ws.state.mkdir(mode=0o700, parents=True, exist_ok=True)
        atomic_write(path, (secrets.token_urlsafe(32) + "\n").encode("ascii"), mode=0o600)
    info = path.lstat()
    if not stat.S_ISREG(info.st_mode) or info.st_uid != os.getuid() or info.st_mode & 0o077:
        raise ConfigError(f"{path} must be a regular file of yours readable by you only (chmod 600 {path})")
    token = path.read_text(encoding="ascii").strip()
    if len(token) < 16:
        raise ConfigError(f"{path} holds no usable token (delete it and a new one is made)")
    return token, str(path)
