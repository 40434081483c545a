"""A job left open by the process that started it, and followed later: an interrupted `mam job delegate`
(SIGINT, SIGTERM, SIGHUP), `mam job delegate --detach`, and `mam job wait ID`.

Interrupting a client never loses work. Once its brief is claimed (recorded before the paste, so it
is never typed twice) the job stays open, the client says `job <id> is still running; follow it
with: mam job wait <id>` and exits 128 + the signal's number. Interrupted before the claim (waiting
for its session's turn, queued by a cap, or looking for its pane), the job keeps its place too: the
brief exists only in the client (the store keeps its hash, not its text), so the client hands the
job to a detached `mam job delegate --job-id` that takes it over, waits for its turn, types it once
and follows it (`mam job cancel ID` drops it); only if no follower takes it over is it cancelled
(`cancelled_by_user`), and the client says so. Interrupted before the job was registered, nothing
exists.

`mam job wait` follows an open job as its owner would: while the owner lives it waits for the job's
end (woken by every commit to its row, mam.util.pokes); once the owner is gone it takes the job over
as `mam job delegate --job-id` does (mam.jobs.delegate: the stored events first, then its
deadlines, never an injection). Its `--timeout` lets go and leaves the job open.
"""

from __future__ import annotations

import contextlib
import math
import os
import sys
import time
from collections.abc import Callable, Mapping
from typing import Any

from mam.errors import JobNotFound, UsageError
from mam.ids import check_job_id
from mam.jobs.delegate import DelegateRequest
from mam.jobs.ledger import owner_alive
from mam.jobs.model import Job
from mam.jobs.queries import existing_registry
from mam.jobs.result import Outcome, outcome_from_row
from mam.jobs.stale import close_if_abandoned, end_job
from mam.outcomes import UNCLAIMED_STATES, Reason, ending
from mam.store.jobs import JobRow
from mam.store.registry import Registry
from mam.util import pokes
from mam.util.proc import module_argv, spawn_detached
from mam.workspace import Workspace

# A living owner says nothing when it dies (kill -9): looked at on this clock (as the turn wait does).
OWNER_CHECK_S = 2.0
HAND_OVER_S = 20.0  # how long an interrupted client waits for the follower it started to own its job


def still_running(job_id: str) -> str:
    """The line an interrupted client prints on stderr (runnable as printed)."""
    return f"job {job_id} is still running; follow it with: mam job wait {job_id}"


def left_behind(ws: Workspace, registry: Registry | None, job_id: str | None, req: DelegateRequest) -> str:
    """An interrupted client's last word about its job (see the module's doc). A job not yet claimed is
    handed over to a follower first (else cancelled, and it says so)."""
    row = registry.find_job(job_id) if registry is not None and job_id else None
    if registry is None or row is None or job_id is None:
        return "mam: interrupted before the job was registered: nothing was made and nothing was typed"
    if row.open and row.state in UNCLAIMED_STATES and not hand_over(ws, registry, row, req):
        cancelled = ending(Reason.CANCELLED_BY_USER)
        detail = "interrupted before its brief was typed, and no follower could take it over"
        ended = end_job(  # only while nobody took it: a follower that just did keeps it
            ws,
            registry,
            job_id,
            cancelled.state,
            cancelled.reason,
            cancelled.exit_code,
            detail,
            by="interrupt",
            expected_owner=row.owner,
        )
        if ended is not None:
            return f"job {job_id} cancelled: interrupted before its brief was typed (nothing reached the agent)"
    return left_open(registry, job_id)


def hand_over(
    ws: Workspace, registry: Registry, row: JobRow, req: DelegateRequest, *, environ: Mapping[str, str] | None = None
) -> bool:
    """Hand an open job to a detached `mam job delegate --job-id` (its own session: no terminal signal
    reaches it), which takes it over and follows it; one not yet claimed it types once, in its turn
    (a claimed one is never typed again). `environ`: the follower's environment (default: this one's).
    The brief goes in a file of this user's (0600, in the 0700 `.mam/run/`), removed once the follower
    owns the job. True once it does (or the job ended meanwhile); False if none took it within HAND_OVER_S."""
    path = ws.run_dir / f"brief-{row.id}"
    try:
        ws.run_dir.mkdir(mode=0o700, parents=True, exist_ok=True)
        with contextlib.suppress(FileNotFoundError):
            path.unlink()  # one left by a client killed mid hand-over (this user's, in the 0700 run folder)
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(req.brief)
    except OSError:
        return False
    try:
        argv = module_argv(
            sys.executable, "mam", "--workspace", str(ws.root), "job", "delegate", f"--target={row.target}"
        )
        argv += [f"--job-id={row.id}", f"--brief-file={path}", "--quiet"]
        if req.dispatch_wait_s is not None:
            argv.append(f"--dispatch-wait={req.dispatch_wait_s}")
        try:
            spawn_detached(argv, env=environ, cwd=ws.root)
        except OSError:
            return False
        deadline = time.monotonic() + HAND_OVER_S
        with pokes.Waiter(ws, [pokes.job_key(row.id)]) as waiter:  # a take-over commits: it pokes the job's key
            while time.monotonic() < deadline:
                now = registry.job(row.id)
                if now.owner != row.owner or not now.open:
                    return True
                waiter.wait(min(0.5, deadline - time.monotonic()))
        return False
    finally:
        try:
            path.unlink()
        except OSError:
            pass


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
    registry: Registry,
    job_id: str,
    *,
    timeout_s: float | None = None,
    take_over: Callable[[DelegateRequest], Outcome],
    on_look: Callable[[Job], None] | None = None,
) -> Outcome | None:
    """Follow the job until it ends: its outcome; None if `timeout_s` passed first (the job stays open).
    `take_over`: drives a request for the job to its end once its owner is gone (the node's attempt);
    `on_look`: told the job each time it changed (a live status line)."""
    if timeout_s is not None and not (math.isfinite(timeout_s) and timeout_s >= 0):
        raise UsageError(f"--timeout must be a finite number of seconds, 0 or more (got {timeout_s})")
    deadline = None if timeout_s is None else time.monotonic() + timeout_s
    seen: dict[str, Any] = {}
    with pokes.Waiter(ws, [pokes.job_key(job_id)]) as waiter:  # listening before the first look
        while True:
            close_if_abandoned(ws, registry, job_id, by="wait")  # its stored events, then its deadlines
            row = registry.job(job_id)
            if on_look is not None and row.data.get("job") and row.data["job"] != seen:
                seen = row.data["job"]
                on_look(Job.from_dict(seen))
            if not row.open:
                return outcome_from_row(registry, job_id)
            left = None if deadline is None else deadline - time.monotonic()
            if left is not None and left <= 0:
                return None
            if not owner_alive(row.owner) and row.state not in UNCLAIMED_STATES:
                req = DelegateRequest(target=row.target, brief="", job_id=job_id, follow_s=left, taking_from=row.owner)
                out = take_over(req)
                if not out.taken_over and not registry.job(job_id).open:
                    return out
                continue  # let go at the timeout, or taken over by another attempt: look again
            waiter.wait(OWNER_CHECK_S if left is None else min(OWNER_CHECK_S, left))
