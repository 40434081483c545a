"""Session drift repairs: dead panes and agents marked terminated, unknown live agent panes registered."""

from __future__ import annotations

import time
from dataclasses import dataclass

from mam.agents import get_adapter
from mam.errors import MamError
from mam.ids import is_name
from mam.monitor.detect import find_agent
from mam.notify import session_terminated
from mam.panes import default_server
from mam.panes.base import PaneInfo
from mam.sessions.common import backend_for
from mam.sessions.orchestrator import orchestrator_keys
from mam.sessions.status import ServerKey, drift_of, pane_snapshot, server_key
from mam.settings import Settings
from mam.store import sessions as sessions_table
from mam.store.registry import Registry
from mam.store.sessions import LIVE, SessionRow, SessionStatus
from mam.util.proc import pid_alive, started_at
from mam.workspace import Workspace

STARTING_GRACE_S = 30.0


@dataclass(frozen=True)
class Repair:
    what: str  # terminated | registered
    session: str
    reason: str


def reconcile_sessions(ws: Workspace, settings: Settings, registry: Registry) -> list[Repair]:
    rows = registry.sessions()
    # The rows' servers, each by its recorded socket, and the workspace's default server as this process finds it.
    probe = [
        SessionRow(name="", agent="", role="", backend="tmux", server=default_server("tmux", settings, ws), cwd="")
    ]
    panes = pane_snapshot(rows + probe, settings=settings, ws=ws)
    repairs: list[Repair] = []
    now = time.time()
    for row in rows:
        if row.status not in LIVE:
            continue
        if row.status == SessionStatus.STARTING and now - row.updated_at < STARTING_GRACE_S:
            continue
        found = panes.get(server_key(row, settings=settings, ws=ws))
        pane, drift = drift_of(row, found)
        if (
            drift
            and (pane is None or pane.dead or "another process" in drift)
            and _confirmed(row, settings=settings, ws=ws)
        ):
            if _mark_terminated(registry, row, drift):
                repairs.append(Repair("terminated", row.name, drift))
                session_terminated(ws, settings, row.name, f"monitor: {drift}")
    repairs.extend(_register_unknown(ws, settings, registry, panes))
    return repairs


def _confirmed(row: SessionRow, *, settings: Settings, ws: Workspace) -> bool:
    """Look again at this one pane before acting: a listing can be wrong for a moment (a busy server,
    a failed command), and a watchdog must not terminate a live agent on a stale read."""
    try:
        again = backend_for(row, settings=settings, ws=ws).pane(row.pane_id) if row.pane_id else None
    except MamError:
        return False  # cannot tell now: leave it for the next pass
    if again is None or again.dead:
        return True
    return bool(row.pane_pid and again.pid and again.pid != row.pane_pid) or not pid_alive(again.pid)


def _mark_terminated(registry: Registry, row: SessionRow, reason: str) -> bool:
    with registry.write(sessions=True) as conn:
        current = sessions_table.find(conn, row.name)
        if current is None or current.status not in LIVE or current.pane_id != row.pane_id:
            return False  # changed meanwhile (resumed, stopped): leave it
        sessions_table.update(conn, row.name, status=SessionStatus.TERMINATED, note=f"monitor: {reason}")
    return True


def _register_unknown(
    ws: Workspace, settings: Settings, registry: Registry, panes: dict[ServerKey, dict[str, PaneInfo] | None]
) -> list[Repair]:
    rows = registry.sessions()
    claimed = {(*server_key(r, settings=settings, ws=ws), r.pane_id) for r in rows if r.pane_id and r.status in LIVE}
    orchestrators = orchestrator_keys(registry)
    taken = {r.name for r in rows}
    repairs = []
    for (kind, server, socket), found in panes.items():
        for pane in (found or {}).values():
            if (
                pane.dead
                or (kind, server, socket, pane.pane_id) in claimed
                or f"{kind}:{server}:{pane.pane_id}" in orchestrators
            ):
                continue
            agent = find_agent(pane.pid)
            if agent is None:
                continue  # not an agent: a shell or a tool, none of mam's business
            name = _free_name(pane.name, pane.pane_id, taken)
            taken.add(name)
            adapter = get_adapter(agent.agent)
            conversation = agent.flag("--session-id", "-s", "--resume", "--conversation", "--session")
            started = started_at(agent.pid)
            if conversation is None and started is not None:
                try:
                    conversation = adapter.discover(cwd=pane.cwd, since=started, env={})
                except (MamError, OSError):
                    conversation = None
            row = SessionRow(
                name=name,
                agent=agent.agent,
                role="adopted",
                backend=kind,
                server=server,
                socket=socket,
                cwd=pane.cwd,
                status=SessionStatus.RUNNING,
                pane_id=pane.pane_id,
                pane_pid=pane.pid,
                conversation_id=conversation,
                launched_at=started or time.time(),
                note=f"monitor: registered a live {agent.agent} pane the registry did not know",
            )
            try:
                registry.add_session(row)
            except MamError:
                continue
            repairs.append(
                Repair("registered", name, f"live {agent.agent} agent in {kind}:{server} pane {pane.pane_id}")
            )
    return repairs


def _free_name(window: str, pane_id: str, taken: set[str]) -> str:
    base = window if is_name(window) else "adopted"
    if base not in taken:
        return base
    return f"{base}-{pane_id.strip('%').replace(':', '-')}"
