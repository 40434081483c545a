"""Fork a session: a new session whose agent starts from a copy of another session's conversation.

With the CLI's own fork where it has one (claude `--resume ID --fork-session`, codex `fork ID`),
else a copy of the conversation's files under a new id (the demo agent); any other CLI is refused
(opencode's `--fork` does not open the fork in its TUI: docs/agents.md). The source session is
never touched and may be running. The fork inherits the source's agent, cwd, permissions, backend
and server (the role unless given), is recorded with `forked_from`, and each fork is a line in the
session audit log (mam.sessions.audit).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

from mam.agents import get_adapter
from mam.errors import SessionError, UsageError
from mam.ids import check_name
from mam.sessions import audit
from mam.sessions.create import CreateRequest, create_session, discover
from mam.settings import Settings
from mam.store.registry import Registry
from mam.store.sessions import SessionRow
from mam.workspace import Workspace


def fork_session(
    source: str,
    *,
    name: str,
    ws: Workspace,
    settings: Settings,
    registry_of: Callable[[], Registry],
    environ: Mapping[str, str],
    role: str | None = None,
    by: str | None = None,
) -> SessionRow:
    """`mam session fork SRC --session NEW` and the MCP tool `session_fork`.

    Names and `by` are checked before the registry is opened (a refused request writes nothing).
    Raises SessionNotFound (exit 5) for an unknown source, UsageError (exit 2) for a CLI that cannot
    fork, SessionError (exit 1) when NEW exists or the source has no conversation yet."""
    check_name(source, "source session")
    check_name(name)
    if role is not None:
        check_name(role, "role")
    who = audit.check_by(by)
    registry = registry_of()
    try:
        src = registry.session(source)
        adapter = get_adapter(src.agent)
        if not adapter.fork_mode:
            raise UsageError(
                f"session {source!r} runs {src.agent}, which mam cannot fork (no native fork, no known "
                "conversation copy); create a new session instead"
            )
        if src.worktree:
            # Two agents in one checkout and branch, and the source's `session remove` would take the
            # fork's folder away: a session with its own worktree is not forked (yet).
            raise UsageError(
                f"session {source!r} works in its own git worktree ({src.worktree}); mam does not fork such a "
                "session: the fork would share its checkout and branch"
            )
        # A CLI whose id is learnt from its store (codex) may not have written it at create:
        # look now, as `session stop` does (the source's row is left as it is).
        source_id = src.conversation_id or (
            discover(adapter, cwd=src.cwd, since=src.launched_at, env=src.agent_env, timeout=0)
            if src.launched_at
            else None
        )
        if not source_id:
            raise SessionError(
                f"session {source!r} has no conversation yet (its agent writes one at its first turn): nothing to fork",
                session=source,
            )
        adapter.check_resumable(source_id, cwd=src.cwd, env=src.agent_env)
        req = CreateRequest(
            name=name,
            agent=src.agent,
            role=role or src.role,
            cwd=src.cwd,
            backend=src.backend,
            server=src.server,
            socket=src.socket,
            permissions=src.permissions,
            forked_from=src.name,
        )
        copied: list[str] = []  # a conversation copied for this fork: removed again if the launch fails

        def start(new_id: str | None) -> list[str]:
            argv = adapter.fork_argv(source_id, new_id, cwd=src.cwd, env=src.agent_env)
            if adapter.fork_mode == "copy" and new_id:
                copied.append(new_id)
            return argv

        try:
            row = create_session(
                req, ws=ws, settings=settings, registry=registry, environ=environ, fork=start, not_id=source_id
            )
        except BaseException:
            for new_id in copied:
                adapter.purge_conversation(new_id, cwd=src.cwd, env=src.agent_env)
            raise
        audit.append(
            ws,
            "fork",
            session=row.name,
            by=who,
            source=src.name,
            source_conversation=source_id,
            conversation=row.conversation_id,
        )
        return row
    finally:
        registry.close()
