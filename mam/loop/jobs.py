"""Loop jobs: one delegated job per brief, and a batch of them on separate sessions at once.

Each job runs through the ordinary delegation wrapper, so it has the same deadlines,
heartbeats and audit log as any `mam job delegate`. A batch runs one thread per job, each
with its own Registry (SQLite connections are not shared between threads).
"""

from __future__ import annotations

import threading
from dataclasses import dataclass
from pathlib import Path

from mam.errors import MamError
from mam.jobs.delegate import DelegateRequest, Outcome, delegate
from mam.jobs.model import Input, Job
from mam.loop.files import LoopLog
from mam.outcomes import Exit, JobState, Reason, ending
from mam.remote.origin import ORIGIN
from mam.settings import Settings
from mam.store.registry import Registry
from mam.util.fs import atomic_write
from mam.workspace import Workspace


@dataclass(frozen=True)
class JobOptions:
    timeout_s: float | None = None
    start_deadline_s: float | None = None
    heartbeat_s: float | None = None
    dispatch_wait_s: float | None = None


@dataclass(frozen=True)
class Brief:
    session: str
    text: str
    kind: str  # loop-plan, loop-challenge, loop-plan-answer, loop-create, loop-review, loop-fix
    copy_to: Path | None = None  # where the loop keeps a copy of the brief


class JobSender:
    """Runs the loop's jobs and logs when each starts and ends."""

    def __init__(
        self, *, ws: Workspace, settings: Settings, registry: Registry, options: JobOptions, log: LoopLog
    ) -> None:
        self.ws, self.settings, self.registry, self.options, self.log = ws, settings, registry, options, log

    def run(self, brief: Brief, *, registry: Registry | None = None) -> Outcome:
        req = DelegateRequest(
            target=brief.session,
            brief=brief.text,
            timeout_s=self.options.timeout_s,
            start_deadline_s=self.options.start_deadline_s,
            heartbeat_s=self.options.heartbeat_s,
            dispatch_wait_s=self.options.dispatch_wait_s,
            kind=brief.kind,
        )
        if brief.copy_to is not None:
            atomic_write(brief.copy_to, brief.text.encode("utf-8"), fsync=False)
        seen: dict[str, str] = {}

        def update(job: Job, _inp: Input) -> None:
            if seen.get(job.id) != job.state.value:
                seen[job.id] = job.state.value
                self.log("job", session=brief.session, kind=brief.kind, job=job.id, state=job.state.value)

        try:
            out = delegate(
                req,
                ws=self.ws,
                settings=self.settings,
                registry=registry or self.registry,
                on_update=update,
                remote=ORIGIN,
            )
        except MamError as e:
            out = Outcome(
                job_id="", state=JobState.FAILED, reason=type(e).__name__, exit_code=e.exit_code, detail=str(e)
            )
        self.log(
            "job-end",
            session=brief.session,
            kind=brief.kind,
            job=out.job_id,
            state=out.state,
            reason=out.reason,
            exit_code=out.exit_code,
            detail=out.detail,
            result=out.result[:500],
        )
        return out

    def run_all(self, briefs: list[Brief]) -> list[Outcome]:
        """Run the briefs at the same time (one thread and one Registry each); outcomes in the same order."""
        if len(briefs) == 1:
            return [self.run(briefs[0])]
        outcomes: list[Outcome | None] = [None] * len(briefs)

        def one(i: int) -> None:
            registry: Registry | None = None
            try:
                registry = Registry(self.ws)
                outcomes[i] = self.run(briefs[i], registry=registry)
            except BaseException as e:  # never lose a reviewer silently: it becomes a failed outcome
                outcomes[i] = Outcome(
                    job_id="", state=JobState.FAILED, reason=type(e).__name__, exit_code=Exit.FAILED, detail=str(e)
                )
            finally:
                if registry is not None:
                    registry.close()

        # Daemon threads, not a pool: Ctrl-C on the loop must not wait for agents still working
        # (their jobs are closed later by their own deadlines, like any job whose wrapper died).
        threads = [
            threading.Thread(target=one, args=(i,), name=f"mam-loop-{b.session}", daemon=True)
            for i, b in enumerate(briefs)
        ]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        none = ending(Reason.NO_OUTCOME)
        return [
            o if o is not None else Outcome(job_id="", state=none.state, reason=none.reason, exit_code=none.exit_code)
            for o in outcomes
        ]


def failed(out: Outcome) -> str:
    """'' if the job completed, else a one-line account of how it ended."""
    if out.state == JobState.COMPLETED:
        return ""
    return f"job {out.job_id or '(not registered)'} {out.state} ({out.reason}){': ' + out.detail if out.detail else ''}"
