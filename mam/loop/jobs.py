"""Loop jobs: one delegated job per brief, and a batch of them on separate sessions at once.

Each job is a `delegate` operation of the node protocol (mam.node.call), as the CLI's own: the node runs
its attempt and owns it, with the same deadlines, heartbeats and audit log as any `mam job delegate`; the
loop waits for its answer. When no node may run it (MAM_NODE=0, or MAM_NO_AUTOSTART=1 with none running)
the same operation runs in the loop's process. A batch is one request (and one thread of the loop) per
job, all at once.
"""

from __future__ import annotations

import threading
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from mam.errors import MamError
from mam.jobs.ledger import new_job_id
from mam.jobs.result import Outcome
from mam.loop.files import LoopLog
from mam.node.call import to_its_end
from mam.outcomes import Exit, JobState, Reason, ending
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
    """Runs the loop's jobs and logs when each starts and ends. `environ`: the environment whose settings
    variables its requests carry (default: this process's)."""

    def __init__(
        self, *, ws: Workspace, options: JobOptions, log: LoopLog, environ: Mapping[str, str] | None = None
    ) -> None:
        self.root, self.options, self.log, self.environ = ws.root, options, log, environ

    def run(self, brief: Brief) -> Outcome:
        args = {
            "target": brief.session,
            "brief": brief.text,
            "job_id": new_job_id(),
            "timeout_s": self.options.timeout_s,
            "start_deadline_s": self.options.start_deadline_s,
            "heartbeat_s": self.options.heartbeat_s,
            "dispatch_wait_s": self.options.dispatch_wait_s,
            "kind": brief.kind,
        }
        if brief.copy_to is not None:
            atomic_write(brief.copy_to, brief.text.encode("utf-8"), fsync=False)

        def registered(job_id: str) -> None:
            self.log("job", session=brief.session, kind=brief.kind, job=job_id, state=JobState.PENDING.value)

        try:
            out = to_its_end(self.root, args, environ=self.environ, on_job=registered)
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
        """Run the briefs at the same time (one node request and one thread each); outcomes in the same order."""
        if len(briefs) == 1:
            return [self.run(briefs[0])]
        outcomes: list[Outcome | None] = [None] * len(briefs)

        def one(i: int) -> None:
            try:
                outcomes[i] = self.run(briefs[i])
            except BaseException as e:  # never lose a reviewer silently: it becomes a failed outcome
                outcomes[i] = Outcome(
                    job_id="", state=JobState.FAILED, reason=type(e).__name__, exit_code=Exit.FAILED, detail=str(e)
                )

        # Daemon threads, not a pool: Ctrl-C on the loop must not wait for agents still working (their
        # jobs run on in the node, whose requests they were; run here, they are closed by their own
        # deadlines, like any job whose wrapper died).
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
