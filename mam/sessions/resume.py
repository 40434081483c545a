"""Resume a stopped session: relaunch its saved conversation in the folder it ran in."""

from __future__ import annotations

import time
from collections.abc import Mapping

from mam.agents import get_adapter
from mam.agents.ready import wait_ready
from mam.errors import AgentDialog, SessionError
from mam.ids import check_name
from mam.panes import open_backend, socket_gone
from mam.panes.lock import placement_lock
from mam.sessions.common import backend_for, pane_env
from mam.sessions.create import launch_options
from mam.sessions.worktree import check_resumable
from mam.settings import Settings
from mam.store import sessions as sessions_table
from mam.store.registry import Registry
from mam.store.sessions import LIVE, SessionRow, SessionStatus
from mam.workspace import Workspace


def resume_session(
    name: str, *, ws: Workspace, settings: Settings, registry: Registry, environ: Mapping[str, str]
) -> SessionRow:
    row = registry.session(check_name(name))
    adapter = get_adapter(row.agent)
    backend = backend_for(row, settings=settings, ws=ws)
    if row.status == SessionStatus.STARTING and not row.pane_id:
        raise _being_started(name)
    if row.status in LIVE and row.pane_id:
        info = backend.pane(row.pane_id)
        if info is not None and not info.dead:
            raise SessionError(f"session {name!r} is already running (pane {row.pane_id}); stop it first", session=name)
    check_resumable(row, environ)
    adapter.check_resumable(row.conversation_id or "", cwd=row.cwd, env=row.agent_env)
    _claim(registry, row)
    try:
        env = pane_env(ws, name, environ)
        options = launch_options(
            adapter, ws=ws, name=name, cwd=row.cwd, env=env, permissions=row.permissions, board=row.board
        )
        env = adapter.pane_env({**env, **options.env})
        if socket_gone(row.backend, row.socket):  # (a temporary TMUX_TMPDIR removed): where this process finds it
            backend = open_backend(row.backend, row.server, settings=settings, ws=ws)
        backend.ensure_server()
        launched = time.time()
        argv = adapter.with_options(adapter.resume_argv(row.conversation_id or ""), options)
        with placement_lock(ws, row.backend, row.server):
            info = backend.create_pane(name=name, argv=argv, cwd=row.cwd, env=env)
    except BaseException:
        registry.update_session(name, status=row.status, pane_id=row.pane_id, pane_pid=row.pane_pid, note=row.note)
        raise
    note = "resumed"
    agent_env = {**row.agent_env, **adapter.agent_env(env)}

    def loading() -> bool:  # gemini: its box shows, and drops a paste, before it has replayed the conversation
        return adapter.replay_pending(row.conversation_id, env=agent_env, since=launched)

    try:
        ready = wait_ready(backend, info.pane_id, adapter, timeout=settings.ready_timeout_s, loading=loading)
        ready_at = time.time() if ready else None
    except AgentDialog as e:  # the agent runs; a person answers its dialog, and no brief is typed meanwhile
        ready_at, note = None, f"resumed; {e}"
    return registry.update_session(
        name,
        status=SessionStatus.RUNNING,
        pane_id=info.pane_id,
        pane_pid=info.pid,
        launched_at=launched,
        resumable=False,
        socket=backend.socket,  # its recorded server's, or where this process made it (a row made before)
        agent_env=agent_env,
        note=note,
        ready_at=ready_at,
        stopped_by_pause="",  # relaunched: by its next delegation, a job's resume or a person
    )


def _claim(registry: Registry, seen: SessionRow) -> None:
    """Mark the session `starting` if it is still as we saw it, so two resumes never launch two agents."""
    with registry.write(sessions=True) as conn:
        current = sessions_table.get(conn, seen.name)
        if current.status == SessionStatus.STARTING:
            raise _being_started(seen.name)
        if current.updated_at != seen.updated_at:  # every write sets updated_at: it is the row's version
            raise SessionError(
                f"session {seen.name!r} changed while it was being resumed (now {current.status}); "
                "look at `mam session status` and try again",
                session=seen.name,
            )
        sessions_table.update(conn, seen.name, status=SessionStatus.STARTING, note="resuming")


def _being_started(name: str) -> SessionError:
    return SessionError(
        f"session {name!r} is being started by another command; if that command died, "
        f"run `mam session stop --session {name}` first",
        session=name,
    )
