"""Who takes part in a loop: the creator, the planner and the reviewers, checked against the registry."""

from __future__ import annotations

from collections.abc import Sequence

from mam.errors import SessionError, UsageError
from mam.store.registry import Registry
from mam.store.sessions import SessionRow, SessionStatus

REVIEWER_ROLE = "reviewer"


def usable(registry: Registry, name: str, what: str) -> SessionRow:
    """The session row; SessionNotFound (exit 5) if unknown, SessionError if it is not running."""
    row = registry.session(name)
    if row.status not in (SessionStatus.RUNNING, SessionStatus.STARTING):
        hint = " (resume it first)" if row.status == SessionStatus.STOPPED else ""
        raise SessionError(f"the {what} session {name!r} is {row.status}{hint}", session=name)
    return row


def choose_reviewers(
    registry: Registry, creator: str, names: Sequence[str], all_reviewer: bool
) -> tuple[list[str], str]:
    """(reviewer sessions, how they were chosen). Neither option: the creator reviews its own work."""
    if names and all_reviewer:
        raise UsageError("give --reviewer or --all-reviewer, not both")
    if all_reviewer:
        picked = [
            r.name
            for r in registry.sessions()
            if r.role.strip().lower() == REVIEWER_ROLE and r.status == SessionStatus.RUNNING and r.name != creator
        ]
        if not picked:
            raise UsageError(f"--all-reviewer: no running session has the role {REVIEWER_ROLE!r} (besides the creator)")
        return sorted(picked), "every running session whose role is reviewer"
    if names:
        unique = list(dict.fromkeys(n.strip() for n in names if n.strip()))
        for name in unique:
            usable(registry, name, "reviewer")
        return unique, "--reviewer"
    return [creator], "self-review (no --reviewer or --all-reviewer)"
