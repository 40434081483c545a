"""Create a session: reserve the name, start the agent in its own pane, record it."""

from __future__ import annotations

import re
import socket
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from mam.agents import get_adapter, known_agents
from mam.agents.base import PERMISSION_MODES, AgentAdapter, LaunchContext, SessionOptions
from mam.agents.ready import wait_ready
from mam.errors import AgentDialog, AgentExited, SessionRefused, UsageError
from mam.outcomes import Exit
from mam.panes import BACKENDS, default_server, open_backend, socket_gone
from mam.panes.base import PaneBackend
from mam.panes.lock import placement_lock
from mam.sessions import worktree as session_worktree
from mam.sessions.common import check_name, pane_env
from mam.settings import Settings
from mam.store import sessions as sessions_table
from mam.store.registry import Registry
from mam.store.sessions import SessionRow, SessionStatus
from mam.util.poll import Timeout, wait_for
from mam.workspace import Workspace

_CONTROL = re.compile(r"\x1b\[[0-9;?]*[ -/]*[@-~]|[\x00-\x08\x0b-\x1f\x7f]")  # CSI sequences, C0 controls


@dataclass(frozen=True)
class CreateRequest:
    name: str
    agent: str
    role: str
    cwd: str
    backend: str = "tmux"
    server: str = ""  # empty: the workspace's default server for the backend
    discover_timeout: float = 5.0
    permissions: str = "report"  # ask | report | full
    trust: bool = True  # record cwd as trusted where the CLI keeps trust per folder (False: --no-trust)
    token_budget: int = 0  # --token-budget: tokens its jobs may spend in all (0: none; mam.governor)
    board: bool = False  # --board: the agent may also run `mam board ...` without a prompt
    forked_from: str = ""  # `mam session fork`: the source session (its conversation is forked, not a new one)
    socket: str = ""  # the server's recorded socket (a fork: its source's); empty: where this process finds it


def check_request(req: CreateRequest) -> None:
    """Refuse a malformed request (UsageError, exit 2) before anything is opened, written or started."""
    check_name(req.name)
    check_name(req.role, "role")
    if req.agent not in known_agents():
        raise UsageError(f"unknown agent {req.agent!r}; known agents: {', '.join(known_agents())}")
    if req.backend not in BACKENDS:
        raise UsageError(f"unknown backend {req.backend!r}: use tmux or herdr")
    if req.permissions not in PERMISSION_MODES:
        raise UsageError(f"unknown permissions {req.permissions!r}: use {', '.join(PERMISSION_MODES)}")
    if isinstance(req.token_budget, bool) or not isinstance(req.token_budget, int) or req.token_budget < 0:
        raise UsageError(f"--token-budget must be a whole number of tokens, 0 or more (got {req.token_budget!r})")
    if req.server:
        check_name(req.server, "server name")
    if not Path(req.cwd).expanduser().is_dir():
        raise UsageError(f"cwd {req.cwd!r} is not a folder")


@dataclass(frozen=True)
class Created:
    """A new session's row and, with onboarding, how its onboarding job ended (exit 0, 44 or 45)."""

    row: SessionRow
    exit_code: int = Exit.OK
    onboarding: dict[str, Any] | None = None


def start_session(
    *,
    name: str,
    agent: str,
    role: str,
    ws: Workspace,
    settings: Settings,
    registry_of: Callable[[], Registry],
    environ: Mapping[str, str],
    backend: str | None = None,
    server: str | None = None,
    herdr_session: str | None = None,
    cwd: str | None = None,
    permissions: str = "report",
    trust: bool = True,
    token_budget: int = 0,
    board: bool = False,
    worktree: bool = False,
    branch: str | None = None,
    base: str | None = None,
    then: Callable[[SessionRow, Registry], Created] | None = None,
) -> Created:
    """`mam session create` and the MCP tool `session_create`: check, create, then `then` (optional).

    `registry_of` opens the registry only once the request passed its checks (a refused request
    leaves no trace); the registry is closed on the way out. With `worktree` the agent starts in a
    new git worktree `.mam/worktrees/<name>/` on `branch` (default `mam/<name>`) from `base` (HEAD).
    `then(row, registry)`, with the registry still open, says what the new session's answer is: onboarding
    (`mam.onboarding.onboarder`, a layer above sessions and jobs) runs its job there.
    """
    if not worktree and (branch is not None or base is not None):
        raise UsageError("--branch and --base go with --worktree")
    if worktree and cwd:
        raise UsageError("--cwd and --worktree do not go together: the agent works in its new worktree")
    if herdr_session:
        backend, server = "herdr", herdr_session
    req = CreateRequest(
        name=name,
        agent=agent,
        role=role,
        cwd=cwd or str(ws.root),
        backend=backend or settings.backend,
        server=server or "",
        permissions=permissions,
        trust=trust,
        token_budget=token_budget,
        board=board,
    )
    check_request(req)
    get_adapter(req.agent).check_installed(pane_env(ws, req.name, environ))  # before anything is written
    tree = session_worktree.plan(ws, name, branch=branch, base=base, environ=environ) if worktree else None
    registry = registry_of()
    try:
        if tree is not None:
            session_worktree.make(tree, environ)
        try:
            row = create_session(req, ws=ws, settings=settings, registry=registry, environ=environ, worktree=tree)
        except BaseException:
            if tree is not None:
                session_worktree.undo(tree, environ)  # the session did not start: leave nothing behind
            raise
        return Created(row) if then is None else then(row, registry)
    finally:
        registry.close()


def create_session(
    req: CreateRequest,
    *,
    ws: Workspace,
    settings: Settings,
    registry: Registry,
    environ: Mapping[str, str],
    worktree: session_worktree.Plan | None = None,
    fork: Callable[[str | None], list[str]] | None = None,
    not_id: str | None = None,
) -> SessionRow:
    """Reserve the name, start the agent in a new pane, record it running.

    `fork` (mam.sessions.fork): the argv that starts a fork of the source's conversation, given the
    new conversation id (None when the CLI picks it), called once the name is reserved; `not_id`:
    the source's id, never taken as the new session's when it is discovered."""
    check_request(req)
    adapter = get_adapter(req.agent)
    cwd = worktree.path.resolve() if worktree is not None else Path(req.cwd).expanduser().resolve()
    server = req.server or default_server(req.backend, settings, ws)
    env = pane_env(ws, req.name, environ)
    adapter.check_installed(env)
    conversation_id = adapter.fork_id() if fork is not None else adapter.new_conversation_id()
    # The row records where the server's socket is, as this process reaches it (docs/architecture.md,
    # guarantee 20): whoever looks at or delegates to the session later reaches that same server.
    recorded = "" if socket_gone(req.backend, req.socket) else req.socket
    backend = open_backend(req.backend, server, settings=settings, ws=ws, socket=recorded)
    row = SessionRow(
        name=req.name,
        agent=adapter.name,
        role=req.role,
        backend=req.backend,
        server=server,
        cwd=str(cwd),
        status=SessionStatus.STARTING,
        conversation_id=conversation_id,
        agent_env=adapter.agent_env(env),
        permissions=req.permissions,
        token_budget=req.token_budget,
        board=req.board,
        host=socket.gethostname(),
        forked_from=req.forked_from,
        socket=backend.socket,
    )
    if worktree is not None:
        row.worktree, row.branch, row.base, row.base_commit = (
            str(worktree.path),
            worktree.branch,
            worktree.base,
            worktree.base_commit,
        )
    _reserve(registry, row)
    launched = time.time()
    try:
        options = launch_options(
            adapter,
            ws=ws,
            name=req.name,
            cwd=str(cwd),
            env=env,
            permissions=req.permissions,
            trust=req.trust,
            board=req.board,
        )
        env = adapter.pane_env({**env, **options.env})
        if req.trust:
            adapter.trust_folder(str(cwd), env)
        backend.ensure_server()
        with placement_lock(ws, req.backend, server):
            start = fork(conversation_id) if fork is not None else adapter.launch_argv(conversation_id)
            argv = adapter.with_options(start, options)
            info = backend.create_pane(name=req.name, argv=argv, cwd=str(cwd), env=env)
    except BaseException:
        registry.delete_session(req.name)  # free the name: nothing was started
        raise
    note, ready_at, conversation_id = _started(
        req,
        backend,
        info.pane_id,
        adapter,
        registry,
        cwd=cwd,
        env=env,
        launched=launched,
        not_id=not_id,
        conversation_id=conversation_id,
        ready_timeout=settings.ready_timeout_s,
        forked=fork is not None,
    )
    return registry.update_session(
        req.name,
        status=SessionStatus.RUNNING,
        pane_id=info.pane_id,
        pane_pid=info.pid,
        launched_at=launched,
        conversation_id=conversation_id,
        note=note,
        ready_at=ready_at,
    )


def _started(
    req: CreateRequest,
    backend: PaneBackend,
    pane_id: str,
    adapter: AgentAdapter,
    registry: Registry,
    *,
    cwd: Path,
    env: dict[str, str],
    launched: float,
    not_id: str | None,
    conversation_id: str | None,
    ready_timeout: float,
    forked: bool = False,
) -> tuple[str, float | None, str | None]:
    """Wait for the agent in its new pane to be ready (undoing the pane and the row if it shows a dialog or
    exits): the row's note, when it was ready, and its conversation id (discovered if the CLI picks it).
    A fork started as a resume of a copy (gemini) is ready only once it has loaded that copy back."""
    note = "created"
    ready_at = None

    def loading() -> bool:
        return forked and adapter.replay_pending(conversation_id, env=env, since=launched)

    try:
        ready = wait_ready(backend, pane_id, adapter, timeout=ready_timeout, loading=loading)
    except AgentDialog as e:
        _undo(backend, pane_id, registry, req.name)
        raise AgentDialog(
            dialog_message(e, command=adapter.command, cwd=str(cwd), trust=req.trust),
            session=req.name,
            kind=e.context.get("kind", ""),
        ) from None
    except BaseException:
        _undo(backend, pane_id, registry, req.name)
        raise
    ended = exited(backend, pane_id, adapter)
    if ended is not None:
        _undo(backend, pane_id, registry, req.name)
        raise ended
    if ready:
        ready_at = time.time()
    else:
        note = "created; the agent did not show it was ready in time"
    if conversation_id is None:
        conversation_id = discover(
            adapter, cwd=str(cwd), since=launched, env=env, timeout=req.discover_timeout, not_id=not_id
        )
    return note, ready_at, conversation_id


def launch_options(
    adapter: AgentAdapter,
    *,
    ws: Workspace,
    name: str,
    cwd: str,
    env: Mapping[str, str],
    permissions: str,
    trust: bool = True,
    board: bool = False,
) -> SessionOptions:
    """The session's own launch options (permissions, per-session files under .mam/sessions/<name>/)."""
    ctx = LaunchContext(
        session=name,
        cwd=cwd,
        state_dir=ws.session_dir(name),
        env=env,
        permissions=permissions,
        mam_dir=ws.state,
        trust=trust,
        board=board,
    )
    return adapter.session_options(ctx)


def dialog_message(error: AgentDialog, *, command: str, cwd: str, trust: bool) -> str:
    kind = error.context.get("kind", "")
    if kind == "trust":
        how = (
            (
                "run the create again without --no-trust (mam then records the folder as trusted for this CLI), "
                "or answer the dialog once yourself in that CLI"
            )
            if not trust
            else "answer the dialog once yourself in that CLI"
        )
        return (
            f"the agent asks whether to trust {cwd}; mam never answers that for you: {how}. The session was not created"
        )
    title = error.context.get("title", "")
    return (
        f"{command} shows a dialog at launch: {title!r}; mam never answers one: run `{command}` once yourself "
        f"in a terminal in {cwd} and answer it there (it is not asked again once answered), then create the "
        "session again. The session was not created"
    )


def exited(backend, pane_id: str, adapter: AgentAdapter, *, lines: int = 8) -> AgentExited | None:  # type: ignore[no-untyped-def]
    """An AgentExited (exit status and the pane's last lines) if the agent's pane is dead or gone, else None."""
    info = backend.pane(pane_id)
    if info is not None and not info.dead:
        return None
    status = backend.exit_status(pane_id) if info is not None else None  # (it wakes a tmux that missed it)
    screen = backend.capture(pane_id, lines=200) if info is not None else ""
    last = [_CONTROL.sub("", line).rstrip() for line in screen.splitlines()]
    last = [line for line in last if line and not line.startswith("Pane is dead")][-lines:]
    said = f" with status {status}" if status is not None else ""
    shown = ("; its last lines:\n  " + "\n  ".join(last)) if last else "; it printed nothing"
    return AgentExited(
        f"{adapter.name} ({adapter.command}) exited{said} while the session was starting; "
        f"the session was not created{shown}",
        status=status,
    )


def _undo(backend: PaneBackend, pane_id: str, registry: Registry, name: str) -> None:
    """Take back a half-made session: kill its pane and free the name."""
    try:
        backend.kill_pane(pane_id)
    finally:
        registry.delete_session(name)


def _reserve(registry: Registry, row: SessionRow) -> None:
    """Insert the row as `starting`; a terminated session of that name is replaced, any other refused."""
    with registry.write(sessions=True) as conn:
        existing = sessions_table.find(conn, row.name)
        if existing is not None:
            if existing.status != SessionStatus.TERMINATED:
                hint = " (resume it with `mam session resume`)" if existing.status == SessionStatus.STOPPED else ""
                raise SessionRefused(
                    f"session {row.name!r} already exists and is {existing.status}{hint}", session=row.name
                )
            sessions_table.delete(conn, row.name)
        sessions_table.insert(conn, row)


def discover(
    adapter: AgentAdapter, *, cwd: str, since: float, env: Mapping[str, str], timeout: float, not_id: str | None = None
) -> str | None:
    """Poll the agent's on-disk store for the conversation it started; None if it has not written one yet
    (or found only `not_id`: a fork's source)."""

    def look(since: float) -> str | None:
        found: str | None = adapter.discover(cwd=cwd, since=since, env=env)
        return None if found == not_id else found

    if timeout <= 0:
        return look(since)
    try:
        return wait_for(lambda: look(since - 1.0), timeout=timeout, interval=0.1)
    except Timeout:
        return None
