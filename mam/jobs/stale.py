"""Ending a job from outside its wrapper: `mam job cancel`, a runner told by the origin, and jobs
whose wrapper died (closed by their own deadlines, never left open forever; used by a waiting
wrapper, so a dead predecessor never blocks a session, by the governor's gate, by `mam job wait`
and by the monitor).

A job whose wrapper died is judged by its stored events first: each one the agent stored since the
job's last applied `seq` is checked by the same gate (signature, sender, order) and applied through
the same model, in `seq` order, before any deadline is looked at. So a job whose agent reported
`completed` after its wrapper was interrupted is recorded `completed`, whoever closes it.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from mam.bus.envelope import Envelope
from mam.errors import DecodeError, JobError, MamError
from mam.jobs import record as rec
from mam.jobs.gate import EventGate
from mam.jobs.ledger import owner_alive
from mam.jobs.model import End, Event, Input, Job, Tick, input_to_dict, step
from mam.jobs.queries import status
from mam.notify import job_ended
from mam.outcomes import JobState, Reason, ending
from mam.store import journal
from mam.store.journal import Transition
from mam.store.registry import Registry
from mam.workspace import Workspace


def close_if_abandoned(ws: Workspace, registry: Registry, job_id: str, *, by: str = "wrapper") -> Job | None:
    """If the job's owner is dead, end it by its stored events, else when a deadline has passed (or
    cancel it if never delivered).

    Returns the ended job, or None when nothing was done.
    """
    row = registry.find_job(job_id)
    if row is None or not row.open or owner_alive(row.owner):
        return None
    client = str(row.data.get("meta", {}).get("client") or "")
    if client and owner_alive(client) and Job.from_dict(row.data.get("job", {})).untyped:
        # The node that ran it died before its brief was typed, and the `mam job delegate` that asked lives:
        # that client runs the delegation again in the next node, which takes the job over and types it.
        return None

    def decide(job: Job, now: int) -> list[Input]:
        if job.untyped:  # also paused before its brief was typed: nobody is left to type it
            died = ending(Reason.WRAPPER_DIED)
            return [
                End(
                    at=now,
                    state=died.state,
                    reason=died.reason,
                    exit_code=died.exit_code,
                    detail="the wrapper died before delivering the brief",
                )
            ]
        return [*stored_events(ws, registry, job), Tick(now)]  # its events before its deadlines

    return end_outside(ws, registry, job_id, decide, by=by, expected_owner=row.owner)


def stored_events(ws: Workspace, registry: Registry, job: Job) -> list[Input]:
    """The events stored for `job` after the last one it applied, that its wrapper's gate would accept
    (signed with the job's token, a sender allowed for the type, in `seq` order), as model inputs
    timed when they were stored."""
    try:
        token = str(rec.read_record(ws, job.id).get("token", ""))
    except MamError:  # no readable record: no event can be verified
        return []
    if not token:
        return []
    gate = EventGate(job.id, token, last_seq=job.last_seq)
    out: list[Input] = []
    for row in registry.events_after(job.id, job.last_seq):
        # A row whose seq column is not its envelope's is skipped before the gate sees it, as the intake
        # does: a planted row with a high seq cannot make the real events after it look out of order.
        try:
            if Envelope.decode(row.raw, max_bytes=gate.max_bytes).seq != row.seq:
                continue
        except DecodeError:
            continue
        verdict = gate.check(row.raw, "disk")
        env = verdict.envelope
        if verdict.accepted and env is not None:
            at = int(row.recorded_at * 1000)
            out.append(Event(at=at, seq=env.seq, type=env.type, sender=env.sender, body=dict(env.body)))
    return out


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
    expected_owner: str | None = None,
) -> Job | None:
    """End an open job from outside its wrapper (the wrapper adopts it); None if it had already ended
    (or, with `expected_owner`, if another owner has it now)."""
    return end_outside(
        ws,
        registry,
        job_id,
        lambda _job, now: End(at=now, state=state, reason=reason, exit_code=exit_code, detail=detail),
        by=by,
        expected_owner=expected_owner,
    )


def end_outside(
    ws: Workspace,
    registry: Registry,
    job_id: str,
    decide: Callable[[Job, int], Input | list[Input]],
    *,
    by: str,
    expected_owner: str | None = None,
) -> Job | None:
    """Apply `decide(job, now)` (one input, or several in order) to an open job if they end the job
    (and, with `expected_owner`, only if the job still has that owner), through the store's one
    commit: compare-and-set on the owner and the state it was read in, so a wrapper committing at
    the same moment wins or loses whole. Returns the ended job, or None when nothing changed."""
    return change_outside(ws, registry, job_id, decide, by=by, expected_owner=expected_owner, must_end=True)


def change_outside(
    ws: Workspace,
    registry: Registry,
    job_id: str,
    decide: Callable[[Job, int], Input | list[Input]],
    *,
    by: str,
    expected_owner: str | None = None,
    must_end: bool = False,
    said: Mapping[str, Any] | None = None,
) -> Job | None:
    """As `end_outside`, for any change (a pause, a resume: `must_end` False); `said` goes on each input's
    audit line (a pause's mode). Returns the changed job, or None when nothing changed."""
    now = rec.now_ms()
    row = registry.find_job(job_id)
    if row is None or not row.open or (expected_owner is not None and row.owner != expected_owner):
        return None
    job = Job.from_dict(row.data.get("job", {}))
    decided = decide(job, now)
    new, lines = job, []
    for inp in decided if isinstance(decided, list) else [decided]:
        new, why = step(new, inp)
        if why:
            continue
        fields = {"input": input_to_dict(inp), "state": new.state.value, "reason": new.reason}
        lines.append(("input", {**fields, "exit_code": new.exit_code, "by": by, **(said or {})}))
        if new.terminal:
            break
    if (must_end and not new.terminal) or not lines:
        return None
    changes = {
        "state": new.state.value,
        "reason": new.reason,
        "exit_code": new.exit_code,
        "data": {**row.data, "job": new.as_dict()},
        "ended_at": now / 1000 if new.terminal else None,
    }
    done = journal.commit(
        registry,
        Transition(
            job_id,
            lines=lines,
            changes=changes,
            expected_owner=row.owner,
            expected_state=row.state,
        ),
    )
    if not done.ok:  # its owner moved it on meanwhile: look again
        return change_outside(
            ws, registry, job_id, decide, by=by, expected_owner=expected_owner, must_end=must_end, said=said
        )
    if new.terminal:
        job_ended(ws, None, job_id)  # no settings here: the workspace's (.mam.env and the environment)
    return new


def cancel(ws: Workspace, registry: Registry, job_id: str) -> dict[str, Any]:
    """End an open job as cancelled (exit 5): its status view. The brief, if already injected, is not taken back."""
    by_user = ending(Reason.CANCELLED_BY_USER)
    detail = "cancelled with `mam job cancel`"
    if end_job(ws, registry, job_id, by_user.state, by_user.reason, by_user.exit_code, detail, by="cancel") is None:
        row = registry.job(job_id)
        raise JobError(f"job {job_id} already ended: {row.state} ({row.reason})", job_id=job_id)
    return status(registry, job_id)
