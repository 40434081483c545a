"""A read-only snapshot of every session: registry status, pane liveness, and drift between them.

It never starts a server or a pane and never writes the registry (the monitor repairs drift).
"""

from __future__ import annotations

import logging
from typing import Any

from mam.agents import get_adapter
from mam.errors import MamError
from mam.hooks.summary import session_extras
from mam.panes import open_backend
from mam.panes.base import PaneInfo
from mam.settings import Settings
from mam.store.registry import Registry
from mam.store.sessions import LIVE, SessionRow
from mam.workspace import Workspace

log = logging.getLogger(__name__)


ServerKey = tuple[str, str, str]  # (backend, server name, the absolute path of its socket)


def server_key(row: SessionRow, *, settings: Settings, ws: Workspace) -> ServerKey:
    """The server a row's pane is on: its backend, name and socket (the recorded one, else where this
    process finds it: a row made before sockets were recorded, or a probe of the default server)."""
    socket = row.socket or open_backend(row.backend, row.server, settings=settings, ws=ws).socket
    return (row.backend, row.server, socket)


def pane_snapshot(
    rows: list[SessionRow], *, settings: Settings, ws: Workspace
) -> dict[ServerKey, dict[str, PaneInfo] | None]:
    """Panes per server (`server_key`), listed once each; None where the server is not running."""
    looking = settings.with_overrides(MAM_NO_AUTOSTART="1")
    found: dict[ServerKey, dict[str, PaneInfo] | None] = {}
    for key in sorted({server_key(r, settings=looking, ws=ws) for r in rows}):
        backend = open_backend(key[0], key[1], settings=looking, ws=ws, socket=key[2])
        try:
            found[key] = {p.pane_id: p for p in backend.panes()} if backend.server_running() else None
        except MamError as e:
            log.warning("could not list the panes of %s server %r: %s", key[0], key[1], e)
            found[key] = None
    return found


def drift_of(row: SessionRow, panes: dict[str, PaneInfo] | None) -> tuple[PaneInfo | None, str]:
    pane = panes.get(row.pane_id) if panes is not None and row.pane_id else None
    if row.status in LIVE:
        if panes is None:
            return None, f"{row.status} in the registry, {row.backend} server {row.server!r} not running"
        if pane is None:
            return None, f"{row.status} in the registry, pane gone"
        if pane.dead:
            return pane, f"{row.status} in the registry, agent exited (pane dead)"
        if row.pane_pid and pane.pid and pane.pid != row.pane_pid:
            return pane, f"pane {row.pane_id} now runs another process (pid {pane.pid}, registry {row.pane_pid})"
        return pane, ""
    if pane is not None and not pane.dead:
        return pane, f"{row.status} in the registry, but its pane is alive"
    return pane, ""


def _beyond_reporting(row: SessionRow, ws: Workspace) -> tuple[str, ...]:
    """What the session's permissions let its agent do without a prompt besides `mam event`."""

    try:
        adapter = get_adapter(row.agent)
    except MamError:
        return ()
    return adapter.beyond_reporting(row.permissions, ws.state)


def session_status(*, ws: Workspace, settings: Settings) -> list[dict[str, Any]]:
    registry = Registry.open_existing(ws)
    if registry is None:
        return []
    try:
        rows = registry.sessions()
        extras = session_extras(registry)
    finally:
        registry.close()
    panes = pane_snapshot(rows, settings=settings, ws=ws)
    out = []
    for row in rows:
        pane, drift = drift_of(row, panes[server_key(row, settings=settings, ws=ws)])
        out.append(
            {
                "name": row.name,
                "agent": row.agent,
                "role": row.role,
                "status": row.status,
                "backend": row.backend,
                "server": row.server,
                "socket": server_key(row, settings=settings, ws=ws)[2],
                "pane_id": row.pane_id,
                "cwd": row.cwd,
                "conversation_id": row.conversation_id,
                "resume_id": row.conversation_id,
                "resumable": row.resumable,
                "drift": drift,
                "pane_alive": bool(pane and not pane.dead),
                "pane_command": pane.command if pane else None,
                "pane_cwd": pane.cwd if pane else None,
                "pane_pid": pane.pid if pane else None,
                "note": row.note,
                "permissions": row.permissions,
                "board": row.board,
                "beyond_reporting": list(_beyond_reporting(row, ws)),
                "token_budget": row.token_budget,
                "worktree": row.worktree or None,
                "branch": row.branch or None,
                "base": row.base or None,
                "base_commit": row.base_commit or None,
                "host": row.host or None,
                "forked_from": row.forked_from,
                **extras(ws, row),
            }
        )
    return out
