"""The pane placement lock: one pane claim at a time per server, across processes."""

from __future__ import annotations

from mam.util.flock import FileLock
from mam.workspace import Workspace


def placement_lock(ws: Workspace, kind: str, server: str, timeout: float = 60.0) -> FileLock:
    ws.ensure_state()
    safe = "".join(c if c.isalnum() or c in "-_." else "_" for c in server)
    return FileLock(str(ws.lock(f"panes-{kind}-{safe}")), timeout=timeout)
