"""The one table of outcomes: every exit code mam's commands give, every reason a job can end
with (and the state and exit code it ends in), and every reason an event or dispatch is
rejected or ignored.

Nothing else in mam/ spells an exit code or a reason: code takes them from here, and
tests/unit/test_outcomes.py checks the job model, the CLI, the MCP server, MESSAGING.md, the
reason table of docs/delegation.md and every SKILL.md exit table against this module (and greps
mam/ so no literal comes back).
"""

from __future__ import annotations

from collections.abc import Mapping
from enum import Enum

TYPE_CHECKING = False  # (typing is not imported: `mam event` imports this module, once per agent event)
if TYPE_CHECKING:
    from typing import Final


class JobState(str, Enum):
    PENDING = "pending"  # registered, waiting for the session's earlier jobs
    QUEUED = "queued"  # its session's turn came, but a cap (running jobs, tokens) holds it (mam/governor)
    DELIVERING = "delivering"  # the brief is being injected (never injected again after this)
    DELIVERED = "delivered"  # injected; waiting for `started`
    RUNNING = "running"  # `started` received; heartbeats expected
    PAUSED = "paused"  # `mam job pause`: nothing is typed, no deadline runs, until `mam job resume` (mam/jobs/pause.py)
    COMPLETED = "completed"
    FAILED = "failed"
    TIMED_OUT = "timed_out"
    CANCELLED = "cancelled"

    def __str__(self) -> str:
        return self.value


TERMINAL: frozenset[JobState] = frozenset({JobState.COMPLETED, JobState.FAILED, JobState.TIMED_OUT, JobState.CANCELLED})
OPEN: frozenset[JobState] = frozenset(JobState) - TERMINAL
UNCLAIMED: frozenset[JobState] = frozenset({JobState.PENDING, JobState.QUEUED})  # the brief is not in the pane
UNCLAIMED_STATES: tuple[str, ...] = tuple(s.value for s in JobState if s in UNCLAIMED)
OPEN_STATES: tuple[str, ...] = tuple(s.value for s in JobState if s in OPEN)  # for SQL `state IN (...)`


class Exit:
    """The exit codes of `mam` (a contract: docs/architecture.md and the SKILL.md files list them)."""

    OK: Final = 0
    FAILED: Final = 1  # a job failed, a command could not do what it was asked
    USAGE: Final = 2  # a bad option or setting (ConfigError, click's usage error); nothing was written
    TIMED_OUT: Final = 2  # a job timed out (no event for K x N, or the budget spent)
    BROKER_UNAVAILABLE: Final = 3
    LOCK_BUSY: Final = 4  # a single-instance lock (loop, monitor, runner) is held
    NOT_DELIVERED: Final = 5  # a job cancelled (never delivered, cancelled), or taken over by another attempt
    NOT_FOUND: Final = 5  # no such session, job, loop or board key
    STALE_VERSION: Final = 5  # `mam board set|delete --if-version N`: the key is at another version; nothing written
    REFUSED: Final = 5  # the thing is not in a state that allows it (a running session's remove without --force,
    # a resume whose worktree is gone or on another branch, an approval whose branch moved)
    BUDGET: Final = 6  # refused by a token budget (never delivered), or stopped by its --max-tokens
    ONBOARD_FAILED: Final = 44
    ONBOARD_LATE: Final = 45  # the onboarding job did not end in time
    STILL_RUNNING: Final = 124  # `mam job wait --timeout` passed and the job is still open (as timeout(1))
    NO_EXECUTABLE: Final = 127  # the program to run was not found (the shell's code)
    HUNG_UP: Final = 129  # SIGHUP: as INTERRUPTED (128 + the signal, as a shell says)
    INTERRUPTED: Final = 130  # Ctrl-C (SIGINT): `mam job delegate` leaves the job open and says how to follow it
    TERMINATED: Final = 143  # SIGTERM: as INTERRUPTED


class Reason(str, Enum):
    """Why a job ended (its `reason` field)."""

    COMPLETED = "completed"
    AGENT_ERROR = "agent_error"
    AGENT_BLOCKED = "agent_blocked"
    DEADLINE_TIMEOUT = "deadline_timeout"
    WALL_CLOCK_TIMEOUT = "wall_clock_timeout"
    BROKER_UNAVAILABLE = "broker_unavailable"
    SESSION_BUSY = "session_busy"
    TARGET_NOT_FOUND = "target_not_found"
    INJECT_FAILED = "inject_failed"
    CANCELLED_BY_USER = "cancelled_by_user"
    WRAPPER_DIED = "wrapper_died"
    WRAPPER_ERROR = "wrapper_error"
    ENDED_WITHOUT_REPORT = "ended_without_report"
    RUNNER_ERROR = "runner_error"
    RUNNER_STOPPED = "runner_stopped"
    BRIEF_REFUSED = "brief_refused"
    NO_OUTCOME = "no_outcome"
    QUEUE_TIMEOUT = "queue_timeout"
    BUDGET_EXHAUSTED = "budget_exhausted"
    TOKEN_BUDGET = "token_budget"
    REVOKED = "revoked"

    def __str__(self) -> str:
        return self.value


class Ending:
    """One row of the table: a reason, the state a job ends in for it, and the exit code.

    A plain class, not a dataclass: importing dataclasses (and inspect) would cost `mam event` ~8 ms."""

    __slots__ = ("reason", "state", "exit_code", "when")

    def __init__(self, reason: Reason, state: JobState, exit_code: int, when: str) -> None:
        self.reason, self.state, self.exit_code, self.when = reason, state, exit_code, when

    def __repr__(self) -> str:
        return f"Ending({self.reason!r}, {self.state!r}, {self.exit_code!r}, {self.when!r})"


ENDINGS: Mapping[Reason, Ending] = {
    e.reason: e
    for e in (
        Ending(Reason.COMPLETED, JobState.COMPLETED, Exit.OK, "the agent's `completed` event"),
        Ending(Reason.AGENT_ERROR, JobState.FAILED, Exit.FAILED, "the agent's `error` event"),
        Ending(Reason.AGENT_BLOCKED, JobState.FAILED, Exit.FAILED, "no `started` within T of delivery"),
        Ending(Reason.DEADLINE_TIMEOUT, JobState.TIMED_OUT, Exit.TIMED_OUT, "no event for K x N after the last one"),
        Ending(Reason.WALL_CLOCK_TIMEOUT, JobState.TIMED_OUT, Exit.TIMED_OUT, "the budget is spent"),
        Ending(Reason.BROKER_UNAVAILABLE, JobState.FAILED, Exit.BROKER_UNAVAILABLE, "no broker when one was needed"),
        Ending(Reason.SESSION_BUSY, JobState.CANCELLED, Exit.NOT_DELIVERED, "earlier jobs outlasted the wait"),
        Ending(
            Reason.TARGET_NOT_FOUND, JobState.CANCELLED, Exit.NOT_DELIVERED, "no such session, or its agent is gone"
        ),
        Ending(Reason.INJECT_FAILED, JobState.CANCELLED, Exit.NOT_DELIVERED, "the paste into the pane failed"),
        Ending(Reason.CANCELLED_BY_USER, JobState.CANCELLED, Exit.NOT_DELIVERED, "`mam job cancel`"),
        Ending(Reason.WRAPPER_DIED, JobState.CANCELLED, Exit.NOT_DELIVERED, "the wrapper died before delivering"),
        Ending(Reason.WRAPPER_ERROR, JobState.FAILED, Exit.FAILED, "the wrapper hit an unexpected error"),
        Ending(
            Reason.ENDED_WITHOUT_REPORT,
            JobState.FAILED,
            Exit.FAILED,
            "a turn end with no report after the last reminder",
        ),
        Ending(Reason.RUNNER_ERROR, JobState.FAILED, Exit.FAILED, "a runner `error` event without a reason"),
        Ending(Reason.RUNNER_STOPPED, JobState.CANCELLED, Exit.NOT_DELIVERED, "the runner stopped before delivering"),
        Ending(Reason.BRIEF_REFUSED, JobState.FAILED, Exit.FAILED, "a runner would not paste a dispatched brief"),
        Ending(Reason.NO_OUTCOME, JobState.FAILED, Exit.FAILED, "a loop's job thread ended without an outcome"),
        Ending(Reason.QUEUE_TIMEOUT, JobState.CANCELLED, Exit.NOT_DELIVERED, "a cap held the job queued past the wait"),
        Ending(Reason.BUDGET_EXHAUSTED, JobState.CANCELLED, Exit.BUDGET, "a token budget is spent: refused at once"),
        Ending(Reason.TOKEN_BUDGET, JobState.FAILED, Exit.BUDGET, "its measured usage passed --max-tokens"),
        Ending(Reason.REVOKED, JobState.CANCELLED, Exit.NOT_DELIVERED, "a runner's copy the origin fenced (a revoke)"),
    )
}

# The exit code of a job that ended in a state, for a reason not in ENDINGS (e.g. one a runner sent).
STATE_EXIT: Mapping[JobState, int] = {
    JobState.COMPLETED: Exit.OK,
    JobState.FAILED: Exit.FAILED,
    JobState.TIMED_OUT: Exit.TIMED_OUT,
    JobState.CANCELLED: Exit.NOT_DELIVERED,
}

# `mam job delegate` exits with this when another attempt took the job over (the job keeps its own
# state and reason; the outcome says `taken_over: true`).
TAKEN_OVER_EXIT: Final = Exit.NOT_DELIVERED
TAKEN_OVER_DETAIL: Final = "taken over by another attempt"

# A runner ends its copy of a job with `origin_<reason>` when the origin's final state arrives.
ORIGIN_PREFIX: Final = "origin_"


def ending(reason: Reason) -> Ending:
    return ENDINGS[reason]


def origin_reason(reason: str) -> str:
    return f"{ORIGIN_PREFIX}{reason}"


def onboard_exit_code(state: str, reason: str) -> int:
    """`session create --onboard`: 0 done, 45 not ended in time (timed out or no `started`), else 44."""
    if state == JobState.COMPLETED:
        return Exit.OK
    if state == JobState.TIMED_OUT or reason == Reason.AGENT_BLOCKED:
        return Exit.ONBOARD_LATE
    return Exit.ONBOARD_FAILED


_REASON_VALUES = frozenset(r.value for r in Reason)


class Rejected(str, Enum):
    """Why the receiving gate (or a runner, for a dispatch) refused a message; logged, the job unchanged."""

    OVERSIZE = "oversize"
    NOT_JSON = "not_json"
    BAD_SHAPE = "bad_shape"
    UNKNOWN_VERSION = "unknown_version"
    WRONG_KIND = "wrong_kind"
    WRONG_JOB = "wrong_job"
    BAD_SIGNATURE = "bad_signature"
    SENDER_NOT_ALLOWED = "sender_not_allowed"
    DUPLICATE = "duplicate"
    REPLAY = "replay"
    OUT_OF_ORDER = "out_of_order"
    OUT_OF_WINDOW = "out_of_window"
    STALE_EPOCH = "stale_epoch"  # a runner's event from an older epoch of the job (fenced: the job moved on)
    FUTURE_EPOCH = "future_epoch"  # a token holder's event from an epoch this attempt never issued (newer than its own)
    # dispatches, at a runner
    WRONG_RUNNER = "wrong_runner"
    STALE = "stale"
    BAD_ID = "bad_id"
    MAX_JOBS = "max_jobs"

    def __str__(self) -> str:
        return self.value


class Ignored(str, Enum):
    """Why the job model left a job unchanged by an input (`step`'s second value)."""

    JOB_CLOSED = "job_closed"
    ALREADY_CLAIMED = "already_claimed"
    ALREADY_DELIVERED = "already_delivered"
    SENDER_NOT_ALLOWED = "sender_not_allowed"
    REPLAY = "replay"
    ALREADY_STARTED = "already_started"
    NOT_DELIVERED = "not_delivered"
    BAD_NONCE = "bad_nonce"
    BEFORE_STARTED = "before_started"
    NOTHING_DUE = "nothing_due"
    NO_CHANGE = "no_change"
    PAUSED = "paused"  # the job is paused: nothing starts its delivery, no deadline runs
    NOT_PAUSED = "not_paused"  # a resume of a job that is not paused

    def __str__(self) -> str:
        return self.value
