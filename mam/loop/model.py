"""The loop's request, result and the context its phases share."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from enum import Enum
from pathlib import Path
from typing import Any

from mam.errors import LoopError
from mam.jobs.delegate import Outcome
from mam.loop.files import LoopFiles, LoopLog
from mam.loop.jobs import Brief, JobSender
from mam.outcomes import Exit
from mam.settings import Settings
from mam.store.registry import Registry
from mam.workspace import Workspace

EXIT_PASSED = Exit.OK
EXIT_NOT_PASSED = Exit.FAILED  # also a fatal job failure
MAX_REPEATS = 3  # times one round is reviewed again because the source changed during it


@dataclass(frozen=True)
class LoopRequest:
    creator: str
    task: str
    reviewers: tuple[str, ...] = ()
    all_reviewer: bool = False
    planner: str | None = None
    plan: bool = False  # plan first; without `planner` the creator writes the plan
    plan_talk: int = 2  # challenge / answer turns between creator and planner
    max_loop: int = 3  # review rounds
    max_rebut: int = 1  # [REBUT: ...] answers accepted over the whole loop
    review_only: bool = False  # skip the creator's implementation job
    worktree: str | None = None  # the checkout to review (default: the creator's cwd, else the workspace)
    base: str | None = None  # base rev (default: merge-base of HEAD with the default branch)
    timeout_s: float | None = None  # per job (default MAM_JOB_TIMEOUT_S)
    start_deadline_s: float | None = None
    heartbeat_s: float | None = None
    dispatch_wait_s: float | None = None
    subjob_wait_s: float | None = None  # cap on waiting for the creator's sub-jobs (default MAM_JOB_TIMEOUT_S)
    max_repeats: int = MAX_REPEATS
    slug: str | None = None  # folder name under .agents/reports/ (default: from the task)
    loop_id: str | None = (
        None  # chosen by the caller (the MCP server names the loop before it starts); default: a new one
    )
    approve: bool = False  # --approve: when every reviewer passes, wait for a person (mam.loop.approval)


class LoopState(str, Enum):
    RUNNING = "running"  # no end line in the loop's log yet
    PASSED = "passed"
    NOT_PASSED = "not_passed"
    FAILED = "failed"
    NEEDS_APPROVAL = "needs_approval"  # --approve: every reviewer passed; waiting for `mam loop approve|reject`
    APPROVED = "approved"  # --approve: approved and merged into the base branch

    def __str__(self) -> str:
        return self.value


@dataclass(frozen=True)
class LoopResult:
    loop_id: str
    state: LoopState
    exit_code: int
    reason: str
    rounds: int
    reviewers: list[str]
    final: list[dict[str, Any]]  # the last round's reviews
    promoted: list[str]
    snapshot: dict[str, Any] | None
    rebuts_used: int
    folder: str
    log: str
    history: list[dict[str, Any]] = field(default_factory=list)

    approval: dict[str, Any] | None = None  # --approve: the gate's last decision (by, at, merged...)

    @property
    def passed(self) -> bool:
        return self.state in (LoopState.PASSED, LoopState.APPROVED)

    def as_dict(self) -> dict[str, Any]:
        return {**asdict(self), "passed": self.passed}


class LoopFailed(LoopError):
    """Raised inside the loop when a job it depends on failed or the source never held still; ends it with exit 1."""


@dataclass
class LoopRun:
    """What every phase of one loop needs."""

    req: LoopRequest
    loop_id: str
    ws: Workspace
    settings: Settings
    registry: Registry
    files: LoopFiles
    log: LoopLog
    runner: JobSender
    environ: Mapping[str, str] | None
    workdir: Path
    repo: Path | None
    base: str | None
    no_identity: str  # why there is no snapshot identity ('' when there is one)
    reviewers: list[str]
    branch: str = ""  # --approve: the reviewed branch
    base_branch: str = ""  # --approve: the branch an approval merges into
    creator_jobs: list[str] = field(default_factory=list)

    def send(self, brief: Brief) -> Outcome:
        return self.runner.run(brief)
