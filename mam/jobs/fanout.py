"""`mam job fanout`: the same brief delegated to several targets at once, and their results aggregated.

Each target gets a job of its own, each through the caps and budgets like any job, delegated in a
thread of its own by the caller's `delegator` (the node's delegation: mam.node.service, operation
`fanout`). Aggregates:

    all    wait for every job; decided when every one completed
    first  the first job to complete wins; the others are cancelled (`mam job cancel`)
    vote   wait for every job; each completed result's last non-empty line is its vote; decided
           when one vote has more than half of the targets (a tie or no majority is named as such)

The outcome always carries the provenance: each target's job id, state, result and vote.
"""

from __future__ import annotations

import threading
from collections import Counter
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from typing import Any

from mam.errors import FanoutInterrupted, JobError, JobNotFound, UsageError
from mam.ids import check_job_id
from mam.jobs.brief import check_brief
from mam.jobs.delegate import DelegateRequest, delegate_request
from mam.jobs.ledger import new_job_id
from mam.jobs.result import Outcome
from mam.jobs.stale import cancel
from mam.jobs.target import parse_target
from mam.outcomes import Exit, JobState
from mam.store.registry import Registry
from mam.util.wakepipe import WakePipe
from mam.workspace import Workspace

AGGREGATES = ("all", "first", "vote")
CANCEL_POLL_S = 0.1


@dataclass
class Branch:
    """One target's job and what it gave."""

    target: str
    job_id: str
    state: str = JobState.PENDING.value
    reason: str = ""
    exit_code: int | None = None
    result: str = ""
    vote: str | None = None  # the last non-empty line of a completed result
    error: str = ""  # the delegation itself failed (e.g. no broker)


@dataclass
class Fanout:
    aggregate: str
    decided: bool
    outcome: str  # all: completed / not_all_completed; first: first_completed / none_completed;
    # vote: majority / tie / no_majority / no_votes
    winner: str | None  # the winning vote, or the first completed job's id
    result: str | None  # the aggregate's result: the majority vote, the first job's result
    branches: list[Branch] = field(default_factory=list)

    @property
    def exit_code(self) -> int:
        return Exit.OK if self.decided else Exit.FAILED

    def as_dict(self) -> dict[str, Any]:
        tally = Counter(b.vote for b in self.branches if b.vote is not None)
        return {
            "aggregate": self.aggregate,
            "decided": self.decided,
            "outcome": self.outcome,
            "winner": self.winner,
            "result": self.result,
            "exit_code": self.exit_code,
            "votes": dict(tally) if self.aggregate == "vote" else {},
            "jobs": [asdict(b) for b in self.branches],
        }


def vote_of(result: str) -> str | None:
    """The last non-empty line of a result (None: an empty result casts no vote)."""
    lines = [line.strip() for line in result.splitlines() if line.strip()]
    return lines[-1] if lines else None


def tally(branches: list[Branch]) -> tuple[str, str | None]:
    """(outcome, winner) of a vote over `branches`: a majority needs more than half of all targets."""
    counts = Counter(b.vote for b in branches if b.vote is not None).most_common()
    if not counts:
        return "no_votes", None
    if len(counts) > 1 and counts[0][1] == counts[1][1]:
        return "tie", None
    if counts[0][1] * 2 > len(branches):
        return "majority", counts[0][0]
    return "no_majority", None


def check_targets(targets: list[str]) -> list[str]:
    names = [t.strip() for t in targets if t.strip()]
    if len(names) < 1:
        raise UsageError("--targets names no target")
    sessions = [parse_target(t).session for t in names]  # checks each target's names
    if len(set(sessions)) != len(sessions):
        raise UsageError("--targets names a session twice (a session runs one job at a time)")
    return names


def fanout(
    targets: list[str],
    brief: str,
    *,
    aggregate: str,
    ws: Workspace,
    timeout_s: float | None = None,
    start_deadline_s: float | None = None,
    job_ids: list[str] | None = None,
    delegator: Callable[[DelegateRequest], Outcome],
    on_jobs: Callable[[list[str]], None] | None = None,
) -> Fanout:
    """Delegate `brief` to every target at once and aggregate the jobs' results. `delegator`: how one job
    is delegated to its end (the node's delegation, each in a thread of this call's). `job_ids`: the jobs'
    ids, one per target (default: new ones); a call made again with the same ids takes its jobs over.
    `on_jobs`: told the jobs' ids before any is delegated, in the calling thread."""
    if aggregate not in AGGREGATES:
        raise UsageError(f"unknown --aggregate {aggregate!r}: use {', '.join(AGGREGATES)}")
    names = check_targets(targets)
    check_brief(brief)
    ids = job_ids or [new_job_id() for _ in names]
    if len(ids) != len(names):
        raise UsageError(f"{len(ids)} job ids for {len(names)} targets")
    branches = [Branch(target=t, job_id=check_job_id(i)) for t, i in zip(names, ids, strict=True)]
    requests = [
        delegate_request(
            target=b.target, brief=brief, job_id=b.job_id, timeout_s=timeout_s, start_deadline_s=start_deadline_s
        )
        for b in branches
    ]
    if on_jobs is not None:
        on_jobs([b.job_id for b in branches])
    one = delegator
    ended = _Ended()

    def run(i: int) -> None:
        try:
            _settle(branches[i], one(requests[i]))
        except Exception as e:  # recorded in the provenance; the other jobs go on
            branches[i].error = str(e)
            branches[i].state = "error"
        finally:
            ended.add(i)

    # Daemon threads: on Ctrl-C the process may end while they wait; their jobs stay open, as a
    # `mam job delegate` interrupted leaves its job (`mam job wait`, or the monitor, takes it over).
    threads = [
        threading.Thread(target=run, args=(i,), name=f"mam-fanout-{b.job_id}", daemon=True)
        for i, b in enumerate(branches)
    ]
    try:
        for t in threads:
            t.start()
        if aggregate == "first":
            _first_then_cancel(ws, branches, ended)
        while len(ended.done) < len(branches):
            ended.pipe.wait(None)
    except KeyboardInterrupt:
        jobs = ", ".join(f"{b.job_id} ({b.target})" for b in branches)
        raise FanoutInterrupted(
            f"interrupted: the jobs stay open ({jobs}); follow one to its end with `mam job wait ID`"
        ) from None
    finally:
        if len(ended.done) == len(branches):
            ended.pipe.close()  # else interrupted: a branch still running would write to a closed (or reused) fd
    return _aggregate(aggregate, branches, ended=[branches[i] for i in ended.done])


def _settle(branch: Branch, out: Outcome) -> None:
    branch.state, branch.reason, branch.exit_code, branch.result = out.state, out.reason, out.exit_code, out.result
    if out.state == JobState.COMPLETED.value:
        branch.vote = vote_of(out.result)


class _Ended:
    """The branches whose delegation returned, in that order; the calling thread waits for each on a WakePipe,
    holding no lock, so a Ctrl-C there is the fan-out's interrupt (mam.util.wakepipe)."""

    def __init__(self) -> None:
        self.done: list[int] = []  # list.append is atomic: the branch threads add, the caller reads
        self.pipe = WakePipe()

    def add(self, i: int) -> None:
        self.done.append(i)
        self.pipe.wake()


def _first_then_cancel(ws: Workspace, branches: list[Branch], ended: _Ended) -> None:
    """Wait for the first completed job, then cancel every job still open (retrying one not yet registered)."""
    while len(ended.done) < len(branches) and not any(
        branches[i].state == JobState.COMPLETED.value for i in ended.done
    ):
        ended.pipe.wait(None)
    if not any(b.state == JobState.COMPLETED.value for b in branches):
        return
    registry = Registry(ws)
    try:
        cancelled: set[int] = set()
        while True:
            left = [i for i in range(len(branches)) if i not in ended.done and i not in cancelled]
            if not left:
                return
            for i in left:
                try:
                    cancel(ws, registry, branches[i].job_id)
                    cancelled.add(i)
                except JobNotFound:
                    pass  # not registered yet: try again on the next round
                except JobError:
                    cancelled.add(i)  # it ended on its own meanwhile
            ended.pipe.wait(CANCEL_POLL_S)
    finally:
        registry.close()


def _aggregate(aggregate: str, branches: list[Branch], *, ended: list[Branch]) -> Fanout:
    """The outcome over `branches` (in target order); `ended`: the same, in the order their jobs ended."""
    completed = [b for b in ended if b.state == JobState.COMPLETED.value]
    if aggregate == "all":
        decided = len(completed) == len(branches)
        return Fanout(aggregate, decided, "completed" if decided else "not_all_completed", None, None, branches)
    if aggregate == "first":
        if not completed:
            return Fanout(aggregate, False, "none_completed", None, None, branches)
        first = completed[0]
        return Fanout(aggregate, True, "first_completed", first.job_id, first.result, branches)
    outcome, winner = tally(branches)
    return Fanout(aggregate, outcome == "majority", outcome, winner, winner, branches)
