"""Onboarding: the first job of a new session, sent by `session create --onboard` through the
same machinery as any job (it counts as the session's open job while it runs)."""

from __future__ import annotations

from dataclasses import dataclass

from mam.jobs.delegate import DelegateRequest, delegate
from mam.jobs.model import AGENT_BLOCKED, JobState
from mam.settings import Settings
from mam.store.registry import Registry
from mam.store.sessions import SessionRow
from mam.workspace import Workspace

ONBOARD_FAILED = 44
ONBOARD_LATE = 45


@dataclass(frozen=True)
class OnboardOutcome:
    job_id: str
    state: str
    reason: str
    exit_code: int


def onboarding_brief(row: SessionRow, ws: Workspace) -> str:
    return (
        f"You are {row.name}, a {row.agent} session with the role '{row.role}', managed by mam in the workspace "
        f"{ws.root}.\n"
        f"You work in {row.cwd}. Jobs reach you as messages like this one, each ending with the `mam event` commands "
        "to run.\n"
        f"The mam skills are described in {ws.root}/.agents/skills/*/SKILL.md.\n"
        "For this onboarding job: acknowledge it, read nothing else yet, and report it completed."
    )


def exit_code_for(state: str, reason: str) -> int:
    if state == JobState.COMPLETED.value:
        return 0
    if state == JobState.TIMED_OUT.value or reason == AGENT_BLOCKED:
        return ONBOARD_LATE
    return ONBOARD_FAILED


def onboard_session(
    row: SessionRow, *, ws: Workspace, settings: Settings, registry: Registry, timeout: float | None = None
) -> OnboardOutcome:
    """Delegate the onboarding job and wait for it; 0 done, 44 failed, 45 not ended in time (the session is kept)."""
    budget = timeout if timeout is not None else settings.get_float("MAM_START_DEADLINE_S")
    req = DelegateRequest(
        target=f"{row.backend}:{row.name}",
        brief=onboarding_brief(row, ws),
        timeout_s=budget,
        kind="onboard",
        start_deadline_s=min(budget, settings.get_float("MAM_START_DEADLINE_S")),
    )
    out = delegate(req, ws=ws, settings=settings, registry=registry)
    return OnboardOutcome(out.job_id, out.state, out.reason, exit_code_for(out.state, out.reason))
