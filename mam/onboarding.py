"""Onboarding: the first job of a new session, sent by `session create --onboard` to the workspace's
node as any delegation (it counts as the session's open job while it runs).

It sits above both sessions and jobs: session creation never starts a job, the front ends hand it
`onboarder(...)` as what follows the create (mam.sessions.create.start_session's `then`)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import asdict, dataclass
from typing import Any

from mam.jobs.ledger import new_job_id
from mam.jobs.result import outcome_from_dict
from mam.node.call import answer, call
from mam.outcomes import onboard_exit_code
from mam.sessions.create import Created
from mam.settings import Settings
from mam.store.registry import Registry
from mam.store.sessions import SessionRow
from mam.workspace import Workspace


@dataclass(frozen=True)
class OnboardOutcome:
    job_id: str
    state: str
    reason: str
    exit_code: int
    detail: str = ""


def onboarding_line(o: dict[str, object]) -> str:
    """How an onboarding job's end is told, the same by the CLI and MCP: `onboarding job ID: STATE (REASON): DETAIL`."""
    state, reason = str(o.get("state") or ""), str(o.get("reason") or "")
    said = state + (f" ({reason})" if reason and reason != state else "")
    return f"onboarding job {o.get('job_id')}: {said}" + (f": {o['detail']}" if o.get("detail") else "")


def onboarding_brief(row: SessionRow, ws: Workspace) -> str:
    return (
        f"You are {row.name}, a {row.agent} session with the role '{row.role}', managed by mam in the workspace "
        f"{ws.root}.\n"
        f"You work in {row.cwd}. Jobs reach you as messages like this one, each ending with the `mam event` commands "
        "to run.\n"
        f"The mam skills are described in {ws.root}/.agents/skills/*/SKILL.md.\n"
        "For this onboarding job: acknowledge it, read nothing else yet, and report it completed."
    )


def onboard_session(
    row: SessionRow,
    *,
    ws: Workspace,
    settings: Settings,
    timeout: float | None = None,
    on_job: Callable[[str, float], None] | None = None,
    on_progress: Callable[[dict[str, Any]], None] | None = None,
) -> OnboardOutcome:
    """Delegate the onboarding job through the workspace's node (mam.node.call, as any delegation) and wait
    for it; 0 done, 44 failed, 45 not ended in time (the session is kept). `on_job(job id, its budget in
    seconds)`: once the node names the job; `on_progress`: each progress frame (a live line)."""
    budget = timeout if timeout is not None else settings.start_deadline_s
    args = {
        "target": f"{row.backend}:{row.name}",
        "brief": onboarding_brief(row, ws),
        "timeout_s": budget,
        "kind": "onboard",
        "start_deadline_s": min(budget, settings.start_deadline_s),
        "job_id": new_job_id(),
        "progress": on_progress is not None,
    }

    def frame(f: dict[str, Any]) -> None:
        if on_job is not None and isinstance(f.get("job"), str):
            on_job(f["job"], budget)
        if on_progress is not None and "progress" in f:
            on_progress(f["progress"])

    out = outcome_from_dict(answer(call(ws.root, "delegate", args, on_frame=frame)))
    return OnboardOutcome(
        job_id=out.job_id,
        state=out.state,
        reason=out.reason,
        exit_code=onboard_exit_code(out.state, out.reason),
        detail=out.detail or "",
    )


def onboarder(
    *,
    ws: Workspace,
    settings: Settings,
    timeout: float | None = None,
    on_job: Callable[[str, float], None] | None = None,
    on_progress: Callable[[dict[str, Any]], None] | None = None,
) -> Callable[[SessionRow, Registry], Created]:
    """What follows `session create --onboard`: onboard the new session and answer with its row as the
    onboarding left it, the onboarding's exit code (0, 44 or 45) and its outcome."""

    def then(row: SessionRow, registry: Registry) -> Created:
        outcome = onboard_session(
            row, ws=ws, settings=settings, timeout=timeout, on_job=on_job, on_progress=on_progress
        )
        return Created(registry.session(row.name), outcome.exit_code, asdict(outcome))

    return then
