"""Create a session: reserve the name, start the agent in its own pane, record it."""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from mam.agents import get_adapter, known_agents
from mam.errors import SessionError, UsageError
from mam.panes import BACKENDS, default_server, open_backend
from mam.panes.lock import placement_lock
from mam.sessions.common import check_name, pane_env
from mam.settings import Settings
from mam.store import sessions as sessions_table
from mam.store.registry import Registry
from mam.store.sessions import SessionRow, SessionStatus
from mam.util.poll import Timeout, wait_for
from mam.workspace import Workspace


@dataclass(frozen=True)
class CreateRequest:
    name: str
    agent: str
    role: str
    cwd: str
    backend: str = "tmux"
    server: str = ""  # empty: the workspace's default server for the backend
    discover_timeout: float = 5.0
    ready_timeout: float = 20.0


def check_request(req: CreateRequest) -> None:
    """Refuse a malformed request (UsageError, exit 2) before anything is opened, written or started."""
    check_name(req.name)
    check_name(req.role, "role")
    if req.agent not in known_agents():
        raise UsageError(f"unknown agent {req.agent!r}; known agents: {', '.join(known_agents())}")
    if req.backend not in BACKENDS:
        raise UsageError(f"unknown backend {req.backend!r}: use tmux or herdr")
    if req.server:
        check_name(req.server, "server name")
    if not Path(req.cwd).expanduser().is_dir():
        raise UsageError(f"cwd {req.cwd!r} is not a folder")


@dataclass(frozen=True)
class Created:
    """A new session's row and, with onboarding, how its onboarding job ended (exit 0, 44 or 45)."""

    row: SessionRow
    exit_code: int = 0
    onboarding: dict[str, Any] | None = None


def start_session(*, name: str, agent: str, role: str, ws: Workspace, settings: Settings, registry_of: Callable[[], Registry],
                  environ: Mapping[str, str], backend: str | None = None, server: str | None = None, herdr_session: str | None = None,
                  cwd: str | None = None, onboard: bool = False, onboard_timeout: float | None = None) -> Created:
    """`mam session create` and the MCP tool `session_create`: check, create, onboard (optional).

    `registry_of` opens the registry only once the request passed its checks (a refused request
    leaves no trace); the registry is closed on the way out.
    """
    if herdr_session:
        backend, server = "herdr", herdr_session
    req = CreateRequest(name=name, agent=agent, role=role, cwd=cwd or str(ws.root), backend=backend or settings.get_str("MAM_BACKEND"),
                        server=server or "")
    check_request(req)
    registry = registry_of()
    try:
        row = create_session(req, ws=ws, settings=settings, registry=registry, environ=environ)
        if not onboard:
            return Created(row)
        from mam.jobs.onboard import onboard_session

        outcome = onboard_session(row, ws=ws, settings=settings, registry=registry, timeout=onboard_timeout)
        return Created(registry.session(name), outcome.exit_code, asdict(outcome))
    finally:
        registry.close()


def create_session(req: CreateRequest, *, ws: Workspace, settings: Settings, registry: Registry, environ: Mapping[str, str]) -> SessionRow:
    check_request(req)
    adapter = get_adapter(req.agent)
    cwd = Path(req.cwd).expanduser().resolve()
    server = req.server or default_server(req.backend, settings, ws)
    env = pane_env(ws, req.name, environ)
    conversation_id = adapter.new_conversation_id()
    row = SessionRow(
        name=req.name, agent=adapter.name, role=req.role, backend=req.backend, server=server, cwd=str(cwd),
        status=SessionStatus.STARTING, conversation_id=conversation_id, agent_env=adapter.agent_env(env),
    )
    _reserve(registry, row)
    backend = open_backend(req.backend, server, settings=settings, ws=ws)
    launched = time.time()
    try:
        backend.ensure_server()
        with placement_lock(ws, req.backend, server):
            info = backend.create_pane(name=req.name, argv=adapter.launch_argv(conversation_id), cwd=str(cwd), env=env)
    except BaseException:
        registry.delete_session(req.name)  # free the name: nothing was started
        raise
    note = "created"
    ready_at = None
    if wait_ready(backend, info.pane_id, adapter, timeout=req.ready_timeout):
        ready_at = time.time()
    else:
        note = "created; the agent did not show it was ready in time"
    if conversation_id is None:
        conversation_id = discover(adapter, cwd=str(cwd), since=launched, env=env, timeout=req.discover_timeout)
    return registry.update_session(
        req.name, status=SessionStatus.RUNNING, pane_id=info.pane_id, pane_pid=info.pid, launched_at=launched,
        conversation_id=conversation_id, note=note, ready_at=ready_at,
    )


def _reserve(registry: Registry, row: SessionRow) -> None:
    """Insert the row as `starting`; a terminated session of that name is replaced, any other refused."""
    with registry.write(sessions=True) as conn:
        existing = sessions_table.find(conn, row.name)
        if existing is not None:
            if existing.status != SessionStatus.TERMINATED:
                hint = " (resume it with `mam session resume`)" if existing.status == SessionStatus.STOPPED else ""
                raise SessionError(f"session {row.name!r} already exists and is {existing.status}{hint}", session=row.name)
            sessions_table.delete(conn, row.name)
        sessions_table.insert(conn, row)


def discover(adapter, *, cwd: str, since: float, env: Mapping[str, str], timeout: float) -> str | None:  # type: ignore[no-untyped-def]
    """Poll the agent's on-disk store for the conversation it started; None if it has not written one yet."""
    if timeout <= 0:
        return adapter.discover(cwd=cwd, since=since, env=env)  # type: ignore[no-any-return]
    try:
        return wait_for(lambda: adapter.discover(cwd=cwd, since=since - 1.0, env=env), timeout=timeout, interval=0.1)  # type: ignore[no-any-return]
    except Timeout:
        return None


def wait_ready(backend, pane_id: str, adapter, *, timeout: float) -> bool:  # type: ignore[no-untyped-def]
    """Wait until the agent shows its ready marker (its input box accepts a paste); False on timeout or exit."""
    if adapter.ready_marker is None:
        return True

    def ready() -> bool:
        info = backend.pane(pane_id)
        if info is None or info.dead:
            raise Timeout("the agent exited")
        return bool(adapter.is_ready(backend.capture(pane_id, lines=5000)))

    try:
        return wait_for(ready, timeout=timeout, interval=0.05)
    except Timeout:
        return False
