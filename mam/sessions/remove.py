"""Remove a session: free its name for good, keeping its job history.

A stopped or terminated session's row leaves the registry (and so the YAML mirror); its jobs,
events and audit logs stay. A running one is refused (exit 5) unless `force`, which stops it
first. A session made with `--worktree` gives back its worktree only when clean (or `force`)
and its branch only when every commit on it is in its base (mam.sessions.worktree.release).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from mam.errors import SessionRefused, UsageError
from mam.ids import check_name
from mam.sessions.stop import stop_session
from mam.sessions.worktree import Released, refuse_dirty, release
from mam.settings import Settings
from mam.store import sessions as sessions_table
from mam.store.registry import Registry
from mam.store.sessions import LIVE, SessionRow, SessionStatus
from mam.workspace import Workspace


@dataclass(frozen=True)
class Removed:
    row: SessionRow  # as it was when it was removed
    was: SessionStatus  # its status when the remove began
    stopped: bool  # --force stopped its running agent first
    purged: bool
    worktree: Released | None

    def as_dict(self) -> dict[str, Any]:
        return {
            "name": self.row.name,
            "removed": True,
            "status": self.was.value,
            "stopped": self.stopped,
            "purged": self.purged,
            "conversation_id": self.row.conversation_id,
            "worktree": self.worktree.as_dict() if self.worktree else None,
        }


def check_request(name: str, *, purge_conversation: bool, yes: bool) -> None:
    """UsageError (exit 2) for a bad name or a purge without --yes, before anything is opened."""
    check_name(name)
    if purge_conversation and not yes:
        raise UsageError(
            "--purge-conversation deletes this session's conversation files for good; add --yes to confirm"
        )


def remove_session(
    name: str,
    *,
    ws: Workspace,
    settings: Settings,
    registry: Registry,
    environ: Mapping[str, str] | None,
    force: bool = False,
    purge_conversation: bool = False,
    yes: bool = False,
) -> Removed:
    """`mam session remove NAME`: refuse a running session unless `force`, then drop its row."""
    check_request(name, purge_conversation=purge_conversation, yes=yes)
    row = registry.session(check_name(name))
    was = row.status
    stopped = False
    if row.status in LIVE:
        if not force:
            raise SessionRefused(
                f"session {name!r} is {row.status}; stop it first (`mam session stop --session {name}`) "
                f"or pass --force to stop and remove it",
                session=name,
            )
        stopped = True
    if not force:
        refuse_dirty(row, environ)  # before anything is stopped or purged
    if stopped or purge_conversation:
        # stop_session exits the agent when it runs and does the purge the way `session stop` does.
        row = stop_session(
            name, ws=ws, settings=settings, registry=registry, purge_conversation=purge_conversation, yes=yes
        )
    released = release(row, force=force, environ=environ) if row.worktree else None
    with registry.write(sessions=True) as conn:
        current = sessions_table.find(conn, name)
        if current is not None and current.status in LIVE:
            raise SessionRefused(f"session {name!r} was started again while it was being removed", session=name)
        sessions_table.delete(conn, name)
    return Removed(row=row, was=was, stopped=stopped, purged=purge_conversation, worktree=released)
