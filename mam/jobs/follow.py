"""A job left open by the process that started it, and followed later: an interrupted `mam job delegate`
(SIGINT, SIGTERM, SIGHUP), `mam job delegate --detach`, and `mam job wait ID`.

Interrupting a client never loses work. Once its brief is claimed (recorded before the paste, so it
is never typed twice) the job stays open, the client says `job <id> is still running; follow it
with: mam job wait <id>` and exits 128 + the signal's number. Interrupted before the claim (waiting
for its session's turn, queued by a cap, or looking for its pane), nothing reached the agent and
the brief exists only in the client (the store keeps its hash, not its text): the job is cancelled
(`cancelled_by_user`) and the client says so, rather than leave a job nobody can deliver queued
in front of the session's next one. Interrupted before the job was registered, nothing exists.

`mam job wait` follows an open job as its owner would: while the owner lives it waits for the job's
end (woken by every commit to its row, mam.util.pokes); once the owner is gone it takes the job over
as `mam job delegate --job-id` does (mam.jobs.delegate: the stored events first, then its
deadlines, never an injection). Its `--timeout` lets go and leaves the job open.
"""

from __future__ import annotations

import math
import time

from mam.errors import JobNotFound, UsageError
from mam.ids import check_job_id
from mam.jobs.delegate import DelegateRequest, RemoteOrigin, delegate
from mam.jobs.ledger import owner_alive
from mam.jobs.outcomes import UNCLAIMED_STATES, Reason, ending
from mam.jobs.queries import existing_registry
from mam.jobs.result import Outcome, outcome_from_row
from mam.jobs.stale import close_if_abandoned, end_job
from mam.settings import Settings
from mam.store.jobs import JobRow
from mam.store.registry import Registry
from mam.util import pokes
from mam.workspace import Workspace

# A living owner says nothing when it dies (kill -9): looked at on this clock (as the turn wait does).
OWNER_CHECK_S = 2.0


def still_running(job_id: str) -> str:
    """The line an interrupted client prints on stderr (runnable as printed)."""
    return f"job {job_id} is still running; follow it with: mam job wait {job_id}"


def left_behind(ws: Workspace, registry: Registry | None, job_id: str | None) -> str:
    """An interrupted client's last word about its job (see the module's doc); cancels a job not yet claimed."""
    row = registry.find_job(job_id) if registry is not None and job_id else None
    if registry is None or row is None or job_id is None:
        return "mam: interrupted before the job was registered: nothing was made and nothing was typed"
    if row.open and row.state in UNCLAIMED_STATES:
        cancelled = ending(Reason.CANCELLED_BY_USER)
        detail = "interrupted before its brief was typed"
        ended = end_job(
            ws, registry, job_id, cancelled.state, cancelled.reason, cancelled.exit_code, detail, by="interrupt"
        )
        if ended is not None:
            return f"job {job_id} cancelled: interrupted before its brief was typed (nothing reached the agent)"
    return left_open(registry, job_id)


def left_open(registry: Registry, job_id: str) -> str:
    """What a client that lets go of an existing job says about it."""
    row = registry.job(job_id)
    if row.open:
        return still_running(job_id)
    return f"job {job_id} already ended ({row.state}); its outcome: mam job wait {job_id}"


def waited_job(ws: Workspace, job_id: str) -> tuple[Registry, JobRow]:
    """The registry and row of a job to wait for; UsageError (nothing written) for a bad or unknown id."""
    check_job_id(job_id)
    try:
        registry = existing_registry(ws, job_id)
    except JobNotFound as e:
        raise UsageError(f"no such job: {job_id} (workspace {ws.root})") from e
    row = registry.find_job(job_id)
    if row is None:
        raise UsageError(f"no such job: {job_id} (workspace {ws.root})")
    return registry, row


def wait_for(
    ws: Workspace,
    settings: Settings,
    registry: Registry,
    job_id: str,
    *,
    timeout_s: float | None = None,
    remote: RemoteOrigin | None = None,
) -> Outcome | None:
    """Follow the job until it ends: its outcome; None if `timeout_s` passed first (the job stays open)."""
    if timeout_s is not None and not (math.isfinite(timeout_s) and timeout_s >= 0):
        raise UsageError(f"--timeout must be a finite number of seconds, 0 or more (got {timeout_s})")
    deadline = None if timeout_s is None else time.monotonic() + timeout_s
    with pokes.Waiter(ws, [pokes.job_key(job_id)]) as waiter:  # listening before the first look
        while True:
            close_if_abandoned(ws, registry, job_id, by="wait")  # its stored events, then its deadlines
            row = registry.job(job_id)
            if not row.open:
                return outcome_from_row(registry, job_id)
            left = None if deadline is None else deadline - time.monotonic()
            if left is not None and left <= 0:
                return None
            if not owner_alive(row.owner) and row.state not in UNCLAIMED_STATES:
                req = DelegateRequest(target=row.target, brief="", job_id=job_id, follow_s=left)
                out = delegate(req, ws=ws, settings=settings, registry=registry, remote=remote)
                if not out.taken_over and not registry.job(job_id).open:
                    return out
                continue  # let go at the timeout, or taken over by another attempt: look again
            waiter.wait(OWNER_CHECK_S if left is None else min(OWNER_CHECK_S, left))
