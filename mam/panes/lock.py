"""The pane placement lock: one pane claim at a time per server, across processes."""

from __future__ import annotations

from typing import TYPE_CHECKING

from mam.workspace import Workspace

if TYPE_CHECKING:
    from filelock import FileLock


def placement_lock(ws: Workspace, kind: str, server: str, timeout: float = 60.0) -> FileLock:
    from filelock import FileLock  # slow to import (asyncio): only a pane's creation or resume takes it

    ws.ensure_state()
    safe = "".join(c if c.isalnum() or c in "-_." else "_" for c in server)
    return FileLock(str(ws.lock(f"panes-{kind}-{safe}")), timeout=timeout)
