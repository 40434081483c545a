"""Closing jobs whose wrapper died: by their own deadlines, never left open forever.

Used by a waiting wrapper (so a dead predecessor never blocks a session) and by the monitor.
"""

from __future__ import annotations

from mam.errors import MamError
from mam.jobs import record as rec
from mam.jobs.ledger import owner_alive
from mam.jobs.model import End, Job, JobState, Tick, input_to_dict, step
from mam.store import jobs as jobs_table
from mam.store.registry import Registry
from mam.workspace import Workspace

WRAPPER_DIED = "wrapper_died"


def close_if_abandoned(ws: Workspace, registry: Registry, job_id: str, *, by: str = "wrapper") -> Job | None:
    """If the job's owner is dead, end it when a deadline has passed (or cancel it if never delivered).

    Returns the ended job, or None when nothing was done. Safe against races: compare-and-set on state and owner.
    """
    row = registry.find_job(job_id)
    if row is None or not row.open or owner_alive(row.owner):
        return None
    job = Job.from_dict(row.data.get("job", {}))
    now = rec.now_ms()
    if job.state is JobState.PENDING:
        inp: End | Tick = End(now, JobState.CANCELLED, WRAPPER_DIED, 5, "the wrapper died before delivering the brief")
    else:
        inp = Tick(now)
    new, _why = step(job, inp)
    if not new.terminal:
        return None
    line = {"input": input_to_dict(inp), "state": new.state.value, "reason": new.reason, "exit_code": new.exit_code, "by": by}
    with registry.write() as conn:
        ok = jobs_table.update(conn, job_id, expected_owner=row.owner, expected_state=row.state, state=new.state.value, reason=new.reason,
                               exit_code=new.exit_code, data={**row.data, "job": new.as_dict()}, ended_at=now / 1000)
        if ok:
            (line,) = jobs_table.add_inputs(conn, job_id, [line])
    if not ok:
        return None
    try:
        record = rec.read_record(ws, job_id)
        rec.write_record(ws, job_id, {**record, **new.as_dict()})
    except (MamError, OSError):  # the registry row is the truth; a missing record must not stop the repair
        pass
    rec.audit(ws, job_id, "input", **line)
    return new
