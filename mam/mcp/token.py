"""The bearer token `mam mcp --http` requires: MAM_MCP_TOKEN, else `.mam/mcp-token` (0600), made on first use."""

from __future__ import annotations

from mam.settings import Settings
from mam.util.tokenfile import workspace_token
from mam.workspace import Workspace

TOKEN_FILE = "mcp-token"


def server_token(ws: Workspace, settings: Settings) -> tuple[str, str]:
    """(token, where it came from). The token itself is never printed or logged."""
    return workspace_token(ws, given=settings.mcp_token, setting="MAM_MCP_TOKEN", file_name=TOKEN_FILE)
