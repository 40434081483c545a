"""The job lifecycle as a pure function: `advance(job, input) -> job`. No I/O, no clock.

Every rule of the delegation contract lives here, so it can be tested without a pane or a
broker, and the same function replays a job from its audit log (the log records every input
that changed the job). Times are integer milliseconds.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, replace
from typing import Any

from mam.jobs import activity
from mam.outcomes import ENDINGS, STATE_EXIT, TERMINAL, UNCLAIMED, Ignored, JobState, Reason
from mam.outcomes import OPEN as OPEN  # the states live with the table of outcomes; re-exported here

_OWN_CODE = frozenset({Reason.BUDGET_EXHAUSTED.value, Reason.TOKEN_BUDGET.value})
# Which sender may send which event type.
SENDER_TYPES: Mapping[str, frozenset[str]] = {
    "agent": frozenset({"started", "progress", "heartbeat", "completed", "error", "activity"}),
    "heartbeater": frozenset({"heartbeat"}),
    "runner": frozenset({"delivered", "rejected", "error"}),
}


@dataclass(frozen=True)
class Job:
    id: str
    session: str
    nonce: str
    created_ms: int
    start_deadline_ms: int
    heartbeat_ms: int
    heartbeat_k: float
    budget_ms: int
    state: JobState = JobState.PENDING
    reason: str = ""
    detail: str = ""
    exit_code: int | None = None
    claimed_ms: int | None = None
    delivered_ms: int | None = None
    started_ms: int | None = None
    last_event_ms: int | None = None
    ended_ms: int | None = None
    last_seq: int = 0
    result: str = ""
    report: str = ""
    # A task's run (mam/org): how the agent said the task stands when it completed (`--disposition`: done,
    # blocked, review; '' : not said) and, blocked, the task it waits on.
    disposition: str = ""
    waiting_on: str = ""
    # What the agent's own hooks last said (an `activity` event; never a sign of life for the deadlines).
    activity: str = ""  # working / waiting / idle / ended
    activity_ms: int | None = None
    waiting: dict[str, Any] | None = None  # {since, tool, message} while it waits for a person
    turn_ends: int = 0  # turn ends (Stop / notify) seen while the job was open
    queued_for: str = ""  # while queued: what holds it (mam.governor: `slot`, `role_slot`, `budget`; `hold`)
    queued_ms: int | None = None
    # While paused (`mam job pause`): the state it was paused in, which its events go on moving (a `started`,
    # a `completed` of the turn it finishes); since when. Its mode and who asked are in `job_pauses`.
    paused_from: str = ""
    paused_ms: int | None = None
    paused_total_ms: int = 0  # time spent paused: the wall-clock budget does not run meanwhile
    resumed_ms: int | None = None  # the last resume: the start deadline runs again in full from it

    @property
    def terminal(self) -> bool:
        return self.state in TERMINAL

    @property
    def untyped(self) -> bool:
        """Its brief was never typed: waiting for its turn, or paused while it waited."""
        return self.state in UNCLAIMED or (self.state is JobState.PAUSED and JobState(self.paused_from) in UNCLAIMED)

    def as_dict(self) -> dict[str, Any]:
        """Its fields as plain data (what `dataclasses.asdict` gives, without its deep copies: every
        field is a plain value but `waiting`, a flat dict, copied)."""
        data = {name: getattr(self, name) for name in self.__dataclass_fields__}
        data["state"] = self.state.value
        if self.waiting is not None:
            data["waiting"] = dict(self.waiting)
        return data

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Job:
        known = {k: v for k, v in data.items() if k in cls.__dataclass_fields__}
        known["state"] = JobState(known.get("state", "pending"))
        return cls(**known)


# -- inputs -------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Claim:
    """The wrapper is about to inject the brief (recorded before the paste: at most once)."""

    at: int


@dataclass(frozen=True)
class Queued:
    """Its session's turn came, but a cap holds it (mam.governor): what holds it, in `waiting_for`."""

    at: int
    waiting_for: str


@dataclass(frozen=True)
class Delivered:
    """The brief was injected (locally, or a runner said so)."""

    at: int


@dataclass(frozen=True)
class Event:
    """A verified event (signature and seq already checked by the gate)."""

    at: int
    seq: int
    type: str
    sender: str
    body: Mapping[str, Any]


@dataclass(frozen=True)
class Tick:
    """Time passed: deadlines are checked against `at`."""

    at: int


@dataclass(frozen=True)
class End:
    """The orchestrator side ends the job (cancelled / failed) for a reason of its own."""

    at: int
    state: JobState
    reason: str
    exit_code: int
    detail: str = ""


@dataclass(frozen=True)
class Pause:
    """`mam job pause` (or `mam pause --all`): nothing more is typed, and no deadline runs, until a Resume."""

    at: int


@dataclass(frozen=True)
class Resume:
    """`mam job resume`. A job paused before its brief was typed goes back to waiting for its turn; one paused
    after it is typed a resume brief with `nonce` (new), and needs a fresh `started` within the start deadline."""

    at: int
    nonce: str


Input = Claim | Queued | Delivered | Event | Tick | End | Pause | Resume


def _end(
    job: Job, at: int, state: JobState, reason: str, *, detail: str = "", exit_code: int | None = None, **extra: Any
) -> Job:
    if exit_code is None:  # a runner's budget reason keeps its own code (exit 6); others exit as their state
        row = ENDINGS[Reason(reason)] if reason in _OWN_CODE else None
        exit_code = row.exit_code if row is not None and row.state is state else STATE_EXIT[state]
    code = exit_code
    return replace(job, state=state, reason=reason, detail=detail, exit_code=code, ended_ms=at, waiting=None, **extra)


def step(job: Job, inp: Input) -> tuple[Job, str]:
    """Apply one input. Returns the new job and, when the input was ignored, why (else '')."""
    if job.terminal:
        return job, Ignored.JOB_CLOSED
    if isinstance(inp, Pause | Resume):
        return _pause(job, inp)
    if job.state is JobState.PAUSED:
        return _while_paused(job, inp)
    if isinstance(inp, Claim):
        if job.state not in UNCLAIMED:
            return job, Ignored.ALREADY_CLAIMED
        return replace(job, state=JobState.DELIVERING, claimed_ms=inp.at, queued_for=""), ""
    if isinstance(inp, Queued):
        if job.state not in UNCLAIMED:
            return job, Ignored.ALREADY_CLAIMED
        if job.state is JobState.QUEUED and job.queued_for == inp.waiting_for:
            return job, Ignored.NO_CHANGE
        return replace(job, state=JobState.QUEUED, queued_for=inp.waiting_for, queued_ms=job.queued_ms or inp.at), ""
    if isinstance(inp, Delivered):
        if job.state not in (*UNCLAIMED, JobState.DELIVERING):
            return job, Ignored.ALREADY_DELIVERED
        return replace(job, state=JobState.DELIVERED, claimed_ms=job.claimed_ms or inp.at, delivered_ms=inp.at), ""
    if isinstance(inp, End):
        return _end(job, inp.at, inp.state, inp.reason, detail=inp.detail, exit_code=inp.exit_code), ""
    if isinstance(inp, Tick):
        return _tick(job, inp.at)
    return _event(job, inp)


def _pause(job: Job, inp: Pause | Resume) -> tuple[Job, str]:
    if isinstance(inp, Pause):
        if job.state is JobState.PAUSED:
            return job, Ignored.NO_CHANGE  # a pause only escalates its mode (mam/jobs/pause.py), not the job
        return replace(job, state=JobState.PAUSED, paused_from=job.state.value, paused_ms=inp.at), ""
    if job.state is not JobState.PAUSED:
        return job, Ignored.NOT_PAUSED
    was = JobState(job.paused_from)
    # The wall-clock budget runs from delivery: only a pause after it stops its clock.
    paused_for = 0 if was in UNCLAIMED else max(0, inp.at - (job.paused_ms or inp.at))
    resumed = replace(job, paused_from="", paused_ms=None, paused_total_ms=job.paused_total_ms + paused_for)
    if was in UNCLAIMED:  # its brief was never typed: it waits for its turn again
        return replace(resumed, state=JobState.PENDING, queued_for="", queued_ms=None), ""
    return replace(resumed, state=JobState.DELIVERED, nonce=inp.nonce, resumed_ms=inp.at), ""


def _while_paused(job: Job, inp: Input) -> tuple[Job, str]:
    """A paused job's own events (and the end of a paste under way) move the state it was paused in; an end
    ends it; nothing starts its delivery, and no deadline runs."""
    if isinstance(inp, End):
        return _end(
            replace(job, paused_from=""), inp.at, inp.state, inp.reason, detail=inp.detail, exit_code=inp.exit_code
        ), ""
    if not isinstance(inp, Delivered | Event):
        return job, Ignored.PAUSED
    inner, why = step(replace(job, state=JobState(job.paused_from)), inp)
    if inner.terminal:
        return replace(inner, paused_from=""), why
    if why:
        return job, why
    return replace(inner, state=JobState.PAUSED, paused_from=inner.state.value), ""


def _event(job: Job, ev: Event) -> tuple[Job, str]:
    if ev.type not in SENDER_TYPES.get(ev.sender, frozenset()):
        return job, Ignored.SENDER_NOT_ALLOWED
    if ev.seq <= job.last_seq:
        return job, Ignored.REPLAY
    seen = replace(job, last_seq=ev.seq)
    if ev.sender == "runner":
        if ev.type == "delivered":
            if job.state not in (*UNCLAIMED, JobState.DELIVERING):
                return seen, ""
            return replace(
                seen,
                state=JobState.DELIVERED,
                delivered_ms=ev.at,
                claimed_ms=job.claimed_ms or ev.at,
                last_event_ms=ev.at,
            ), ""
        if ev.type == "rejected":
            reason = str(ev.body.get("reason") or Reason.TARGET_NOT_FOUND)
            return _end(seen, ev.at, JobState.CANCELLED, reason, detail=str(ev.body.get("detail", ""))), ""
        return _end(
            seen,
            ev.at,
            JobState.FAILED,
            str(ev.body.get("reason") or Reason.RUNNER_ERROR),
            detail=str(ev.body.get("detail", "")),
        ), ""
    if ev.type == "started":
        if job.state is JobState.RUNNING:
            return job, Ignored.ALREADY_STARTED
        if job.state in UNCLAIMED:
            return job, Ignored.NOT_DELIVERED
        if ev.body.get("nonce") != job.nonce:
            return job, Ignored.BAD_NONCE
        hb = ev.body.get("heartbeat_ms")
        heartbeat = hb if isinstance(hb, int) and not isinstance(hb, bool) and hb > 0 else job.heartbeat_ms
        return replace(seen, state=JobState.RUNNING, started_ms=ev.at, last_event_ms=ev.at, heartbeat_ms=heartbeat), ""
    if ev.type == "activity":
        if job.state in UNCLAIMED:
            return job, Ignored.NOT_DELIVERED
        return activity.apply(seen, ev), ""
    if job.state is not JobState.RUNNING:
        return job, Ignored.BEFORE_STARTED
    if ev.type in ("progress", "heartbeat"):
        return replace(seen, last_event_ms=ev.at), ""
    if ev.type == "completed":
        return _end(
            seen,
            ev.at,
            JobState.COMPLETED,
            Reason.COMPLETED,
            last_event_ms=ev.at,
            result=str(ev.body.get("message", "")),
            report=str(ev.body.get("report", "")),
            disposition=str(ev.body.get("disposition") or "")[:16],
            waiting_on=str(ev.body.get("waiting_on") or "")[:128],
        ), ""
    # error
    return _end(
        seen, ev.at, JobState.FAILED, Reason.AGENT_ERROR, detail=str(ev.body.get("reason", "")), last_event_ms=ev.at
    ), ""


def deadlines(job: Job) -> list[tuple[int, JobState, str]]:
    """The deadlines that apply to the job now: (time, state it ends in, reason), earliest first."""
    out: list[tuple[int, JobState, str]] = []
    delivered = job.delivered_ms if job.delivered_ms is not None else job.claimed_ms
    if delivered is None or job.state is JobState.PAUSED:
        return out
    out.append((delivered + job.budget_ms + job.paused_total_ms, JobState.TIMED_OUT, Reason.WALL_CLOCK_TIMEOUT))
    if job.state in (JobState.DELIVERING, JobState.DELIVERED):
        typed = job.resumed_ms if job.resumed_ms is not None else delivered
        out.append((typed + job.start_deadline_ms, JobState.FAILED, Reason.AGENT_BLOCKED))
    elif job.state is JobState.RUNNING:
        last = job.last_event_ms if job.last_event_ms is not None else delivered
        out.append((last + int(job.heartbeat_k * job.heartbeat_ms), JobState.TIMED_OUT, Reason.DEADLINE_TIMEOUT))
    return sorted(out, key=lambda d: d[0])


def _tick(job: Job, now: int) -> tuple[Job, str]:
    for at, state, reason in deadlines(job):
        if now > at:
            return _end(job, now, state, reason, detail=activity.blocked_detail(job)), ""
    return job, Ignored.NOTHING_DUE


def advance(job: Job, inp: Input) -> Job:
    return step(job, inp)[0]


def replay(job: Job, inputs: Iterable[Input]) -> Job:
    for inp in inputs:
        job = advance(job, inp)
    return job


# -- (de)serialising inputs for the audit log ---------------------------------------------------
def input_to_dict(inp: Input) -> dict[str, Any]:
    data = dict(vars(inp))  # shallow, unlike asdict: every field is a scalar but `body`, copied below
    data["input"] = type(inp).__name__.lower()
    if isinstance(inp, End):
        data["state"] = inp.state.value
    if isinstance(inp, Event):
        data["body"] = dict(inp.body)
    return data


def input_from_dict(data: Mapping[str, Any]) -> Input:
    kind = data["input"]
    fields = {k: v for k, v in data.items() if k != "input"}
    if kind == "claim":
        return Claim(**fields)
    if kind == "queued":
        return Queued(**fields)
    if kind == "delivered":
        return Delivered(**fields)
    if kind == "event":
        return Event(**fields)
    if kind == "tick":
        return Tick(**fields)
    if kind == "end":
        fields["state"] = JobState(fields["state"])
        return End(**fields)
    if kind == "pause":
        return Pause(**fields)
    if kind == "resume":
        return Resume(**fields)
    raise ValueError(f"unknown input kind {kind!r}")
