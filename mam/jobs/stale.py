"""Ending a job from outside its wrapper: `mam job cancel`, a runner told by the origin, and jobs
whose wrapper died (closed by their own deadlines, never left open forever; used by a waiting
wrapper, so a dead predecessor never blocks a session, and by the monitor).
"""

from __future__ import annotations

from collections.abc import Callable

from mam.jobs import record as rec
from mam.jobs.ledger import owner_alive
from mam.jobs.model import End, Input, Job, Tick, input_to_dict, step
from mam.jobs.outcomes import UNCLAIMED, JobState, Reason, ending
from mam.notify import job_ended
from mam.store import journal
from mam.store.journal import Transition
from mam.store.registry import Registry
from mam.workspace import Workspace


def close_if_abandoned(ws: Workspace, registry: Registry, job_id: str, *, by: str = "wrapper") -> Job | None:
    """If the job's owner is dead, end it when a deadline has passed (or cancel it if never delivered).

    Returns the ended job, or None when nothing was done.
    """
    row = registry.find_job(job_id)
    if row is None or not row.open or owner_alive(row.owner):
        return None

    def decide(job: Job, now: int) -> End | Tick:
        if job.state in UNCLAIMED:
            died = ending(Reason.WRAPPER_DIED)
            return End(
                at=now,
                state=died.state,
                reason=died.reason,
                exit_code=died.exit_code,
                detail="the wrapper died before delivering the brief",
            )
        return Tick(now)

    return end_outside(ws, registry, job_id, decide, by=by, expected_owner=row.owner)


def end_job(
    ws: Workspace,
    registry: Registry,
    job_id: str,
    state: JobState,
    reason: str,
    exit_code: int,
    detail: str = "",
    *,
    by: str,
) -> Job | None:
    """End an open job from outside its wrapper (the wrapper adopts it); None if it had already ended."""
    return end_outside(
        ws,
        registry,
        job_id,
        lambda _job, now: End(at=now, state=state, reason=reason, exit_code=exit_code, detail=detail),
        by=by,
    )


def end_outside(
    ws: Workspace,
    registry: Registry,
    job_id: str,
    decide: Callable[[Job, int], Input],
    *,
    by: str,
    expected_owner: str | None = None,
) -> Job | None:
    """Apply `decide(job, now)` to an open job if it ends the job (and, with `expected_owner`, only if
    the job still has that owner), through the store's one commit: compare-and-set on the owner and
    the state it was read in, so a wrapper committing at the same moment wins or loses whole.
    Returns the ended job, or None when nothing changed."""
    now = rec.now_ms()
    row = registry.find_job(job_id)
    if row is None or not row.open or (expected_owner is not None and row.owner != expected_owner):
        return None
    job = Job.from_dict(row.data.get("job", {}))
    inp = decide(job, now)
    new, _why = step(job, inp)
    if not new.terminal:
        return None
    line = {"input": input_to_dict(inp), "state": new.state.value, "reason": new.reason, "exit_code": new.exit_code}
    changes = {
        "state": new.state.value,
        "reason": new.reason,
        "exit_code": new.exit_code,
        "data": {**row.data, "job": new.as_dict()},
        "ended_at": now / 1000,
    }
    done = journal.commit(
        registry,
        Transition(
            job_id,
            lines=[("input", {**line, "by": by})],
            changes=changes,
            expected_owner=row.owner,
            expected_state=row.state,
        ),
    )
    if not done.ok:  # its owner moved it on meanwhile: look again
        return end_outside(ws, registry, job_id, decide, by=by, expected_owner=expected_owner)
    job_ended(ws, None, job_id)  # no settings here: the workspace's (.mam.env and the environment)
    return new
