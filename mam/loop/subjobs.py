"""Sub-jobs: jobs the creator delegated with `--parent-job <its job id>` (and theirs, recursively).

Before a review the loop waits for them to end: it sleeps until a job of the workspace ends (a poke,
mam.util.pokes) or the next bound. The wait is bounded by each job's own deadlines (plus the heartbeat
grace), and by an overall cap; a job whose wrapper died is closed by its deadlines
(`close_if_abandoned`) rather than waited on forever. A wrapper that died says nothing, so that is
looked at every ABANDONED_CHECK_S.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable
from dataclasses import asdict, dataclass

from mam.jobs.model import Job
from mam.jobs.stale import close_if_abandoned
from mam.outcomes import OPEN_STATES
from mam.store import jobs as jobs_table
from mam.store.jobs import JobRow
from mam.store.registry import Registry
from mam.util import pokes
from mam.workspace import Workspace

ABANDONED_CHECK_S = 2.0


@dataclass(frozen=True)
class SubJob:
    id: str
    parent: str
    session: str
    state: str
    reason: str
    exit_code: int | None
    result: str

    @property
    def open(self) -> bool:
        return self.state in OPEN_STATES

    def line(self) -> str:
        tail = f" ({self.reason})" if self.reason and self.reason != self.state else ""
        result = f": {self.result}" if self.result else ""
        return f"{self.id} on {self.session} (sub-job of {self.parent}): {self.state}{tail}{result}"

    def as_dict(self) -> dict[str, object]:
        return asdict(self)


def descendants(registry: Registry, parents: Iterable[str]) -> list[JobRow]:
    found: list[JobRow] = []
    queue, seen = list(parents), set()
    while queue:
        parent = queue.pop(0)
        with registry.read() as conn:
            rows = jobs_table.list_jobs(conn, parent=parent, limit=1000)
        for row in reversed(rows):  # oldest first
            if row.id not in seen:
                seen.add(row.id)
                found.append(row)
                queue.append(row.id)
    return found


def _view(row: JobRow) -> SubJob:
    job = row.data.get("job", {})
    return SubJob(
        row.id,
        row.parent_job or "",
        row.session,
        row.state,
        row.reason,
        row.exit_code,
        str(job.get("result", ""))[:300],
    )


def _bound_ms(row: JobRow, dispatch_wait_s: float) -> float:
    """When waiting for this job stops making sense: its last deadline plus the heartbeat grace."""
    job = Job.from_dict(row.data.get("job", {}))
    grace = job.heartbeat_k * job.heartbeat_ms
    started = job.delivered_ms or job.claimed_ms
    if started is None:  # still queued behind the session's earlier jobs
        return job.created_ms + dispatch_wait_s * 1000 + job.start_deadline_ms + job.budget_ms + grace
    return started + job.budget_ms + grace


def wait_subjobs(
    ws: Workspace,
    registry: Registry,
    parents: Iterable[str],
    *,
    max_wait_s: float,
    dispatch_wait_s: float,
    on_wait: Callable[[list[SubJob]], object] | None = None,
) -> tuple[list[SubJob], bool]:
    """Wait until every sub-job ended (or is past its bound); (their final views, whether any had to be waited for)."""
    parents = list(parents)
    deadline = time.monotonic() + max_wait_s
    with pokes.Waiter(ws, [pokes.ENDED]) as waiter:  # listening before the first look: no end is missed
        return _wait(ws, registry, parents, deadline, dispatch_wait_s, on_wait, waiter)


def _wait(
    ws: Workspace,
    registry: Registry,
    parents: list[str],
    deadline: float,
    dispatch_wait_s: float,
    on_wait: Callable[[list[SubJob]], object] | None,
    waiter: pokes.Waiter,
) -> tuple[list[SubJob], bool]:
    waited = False
    while True:
        rows = descendants(registry, parents)
        pending = [r for r in rows if r.open]
        for row in pending:
            close_if_abandoned(ws, registry, row.id, by="loop")
        now_ms = time.time() * 1000
        pending = [r for r in descendants(registry, parents) if r.open and now_ms <= _bound_ms(r, dispatch_wait_s)]
        if not pending or time.monotonic() >= deadline:
            return [_view(r) for r in descendants(registry, parents)], waited
        if not waited and on_wait is not None:
            on_wait([_view(r) for r in pending])
        waited = True
        bound_s = min(_bound_ms(r, dispatch_wait_s) for r in pending) / 1000 - time.time() + 0.001
        waiter.wait(max(0.0, min(ABANDONED_CHECK_S, deadline - time.monotonic(), bound_s)))
