"""Following a job from outside its wrapper: its state and the events it accepted, read from the
registry (the MCP tools `job_wait` and `events_recent`). It never changes a job, except one whose
wrapper died: that one is closed by the rule every closer applies (mam.jobs.stale: its stored
events, then its deadlines), so `job_wait` ends with the agent's real outcome, as `mam job wait`.
"""

from __future__ import annotations

from typing import Any

from mam.ids import check_job_id, check_name
from mam.jobs.queries import status
from mam.jobs.stale import close_if_abandoned
from mam.store import jobs as jobs_table
from mam.store.registry import Registry
from mam.util import pokes


def event_line(job: jobs_table.JobRow | dict[str, Any], line: dict[str, Any]) -> dict[str, Any] | None:
    """An accepted event from a transition line (None for claims, deliveries, ticks and ends)."""
    inp = line.get("input") or {}
    if inp.get("input") != "event":
        return None
    body = inp.get("body") or {}
    job_id, session = (job.id, job.session) if isinstance(job, jobs_table.JobRow) else (job["id"], job["session"])
    return {
        "job": job_id,
        "session": session,
        "n": line.get("n"),
        "seq": inp.get("seq"),
        "type": inp.get("type"),
        "sender": inp.get("sender"),
        "at_ms": inp.get("at"),
        "message": body.get("message") or body.get("reason") or "",
        "state": line.get("state"),
        "reason": line.get("reason"),
    }


class JobWatch:
    """One observer of one job: each `poll()` returns its current view and the events accepted since the last poll;
    `wait(timeout)` sleeps until the job's row changes (a poke of its key: every commit that changes it pokes it) or
    the timeout passes. `close()` when done."""

    def __init__(self, registry: Registry, job_id: str) -> None:
        self.registry, self.job_id = registry, check_job_id(job_id)
        self.registry.job(job_id)  # JobNotFound for an unknown id
        self.seen = 0
        # Listening before the first poll: a change after it cannot be missed.
        self._waiter = pokes.Waiter(registry.ws, [pokes.job_key(self.job_id)])

    def wait(self, timeout: float) -> bool:
        """Until the job's row changes (True) or `timeout` seconds (False)."""
        return self._waiter.wait(timeout)

    def close(self) -> None:
        self._waiter.close()

    def poll(self) -> tuple[dict[str, Any], list[dict[str, Any]]]:
        close_if_abandoned(self.registry.ws, self.registry, self.job_id, by="watch")
        view = status(self.registry, self.job_id)
        with self.registry.read() as conn:
            lines = jobs_table.inputs_after(conn, self.job_id, self.seen)
        if lines:
            self.seen = max(int(line.get("n") or 0) for line in lines)
        events = [e for e in (event_line(view, line) for line in lines) if e is not None]
        return view, events


def recent_events(
    registry: Registry, *, job: str | None = None, session: str | None = None, since_seq: int = 0, limit: int = 100
) -> list[dict[str, Any]]:
    """Accepted events, oldest first: of one job (after its sequence number `since_seq`), else of a
    session's recent jobs, else of the workspace's recent jobs; at most `limit` (the newest)."""
    with registry.read() as conn:
        if job:
            rows = [jobs_table.get(conn, check_job_id(job))]
        else:
            rows = jobs_table.list_jobs(conn, session=check_name(session) if session else None, limit=20)
        out = []
        for row in rows:
            for line in jobs_table.inputs_after(conn, row.id, 0):
                e = event_line(row, line)
                if e is not None and (e["seq"] or 0) > since_seq:
                    out.append(e)
    out.sort(key=lambda e: (e["at_ms"] or 0, e["job"], e["seq"] or 0))
    return out[-limit:] if limit > 0 else out
