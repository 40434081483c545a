"""Record the orchestrator's own pane, so discovery never mistakes it for a sub-agent."""

from __future__ import annotations

import os
import time
from collections.abc import Mapping
from pathlib import Path

from mam.errors import UsageError
from mam.store import sessions as sessions_table
from mam.store.registry import Registry
from mam.store.sessions import OrchestratorRow


def detect_own_pane(environ: Mapping[str, str]) -> tuple[str, str, str] | None:
    """(backend, server, pane_id) of the pane this process runs in, from what tmux / herdr put in its environment."""
    tmux, pane = environ.get("TMUX", ""), environ.get("TMUX_PANE", "")
    if tmux and pane:
        socket = tmux.split(",", 1)[0]
        return "tmux", Path(socket).name, pane
    herdr_pane = environ.get("HERDR_PANE_ID", "")
    if herdr_pane:
        return "herdr", environ.get("HERDR_SESSION", "") or environ.get("HERDR_SESSION_NAME", "default"), herdr_pane
    return None


def onboard_orchestrator(
    *,
    registry: Registry,
    environ: Mapping[str, str],
    backend: str | None = None,
    server: str | None = None,
    pane_id: str | None = None,
    session: str = "",
) -> OrchestratorRow:
    detected = detect_own_pane(environ)
    if pane_id:
        if not (backend and server):
            raise UsageError("--pane needs --backend and --server")
        where = (backend, server, pane_id)
    elif detected is not None:
        where = detected
    else:
        raise UsageError(
            "not inside a tmux or herdr pane (no TMUX_PANE / HERDR_PANE_ID); pass --backend, --server and --pane"
        )
    kind, srv, pane = where
    row = OrchestratorRow(
        key=f"{kind}:{srv}:{pane}",
        backend=kind,
        server=srv,
        pane_id=pane,
        session=session,
        pid=os.getppid(),
        recorded_at=time.time(),
    )
    with registry.write() as conn:
        sessions_table.record_orchestrator(conn, row)
    return row


def orchestrator_keys(registry: Registry) -> set[str]:
    return {o.key for o in registry.orchestrators()}
