"""One remote job on the runner's host: registered locally with the origin's deadlines and the job's
token derived from the dispatch's key nonce and MAM_DISPATCH_SECRET (it never travels), driven by
a `JobAttempt` like a local job (wait for the session's turn, check the agent, inject once, press
Enter again if needed, follow the disk path) from the runner's parts: the brief pasted as sent, no
broker connection of its own (the runner relays the job's events), and `delivered` or `rejected`
reported back to the origin as runner events.

The copy is fenced: once the runner hears that the job ended at the origin or moved on without it
(the origin's final state, or a revoke naming a newer epoch: `Fence`), nothing more is typed into
the pane for it (no brief, no Enter, no reminder) and nothing more is reported to the origin.
"""

from __future__ import annotations

import os
import threading

from mam.bus.topics import prefix_for
from mam.errors import JobError, UsageError
from mam.jobs.attempt import JobAttempt, StoreEvents
from mam.jobs.brief import MAX_BRIEF_BYTES, check_brief
from mam.jobs.delivery import PaneDelivery
from mam.jobs.emit import Emitter
from mam.jobs.ledger import Ledger, held, new_owner
from mam.jobs.model import End, Job
from mam.jobs.record import now_ms
from mam.jobs.result import Outcome
from mam.jobs.target import Target
from mam.outcomes import UNCLAIMED, Reason, ending
from mam.remote.dispatch import Dispatch
from mam.settings import Settings
from mam.store.registry import Registry
from mam.util.proc import start_time
from mam.workspace import Workspace

FOOTER_ALLOWANCE = 4096  # the origin's footer comes on top of a brief of up to MAX_BRIEF_BYTES


def brief_problem(text: str) -> str:
    """Why a dispatched brief must not be pasted ('' if it may): the same checks as a local brief."""
    try:
        check_brief(text, max_bytes=MAX_BRIEF_BYTES + FOOTER_ALLOWANCE)
    except UsageError as e:
        return str(e)
    return ""


class Fence:
    """The jobs of this runner that must no longer type into a pane or speak to their origin, and why: ended at
    the origin, or revoked (it moved on to a newer epoch). Set by the runner's loop, read by the jobs' threads."""

    def __init__(self) -> None:
        self._why: dict[str, str] = {}
        self._lock = threading.Lock()

    def stop(self, job_id: str, why: str) -> None:
        with self._lock:
            self._why.setdefault(job_id, why)

    def why(self, job_id: str) -> str:
        """'' while the job may go on here."""
        with self._lock:
            return self._why.get(job_id, "")

    def forget(self, job_id: str) -> None:
        with self._lock:
            self._why.pop(job_id, None)


class FencedDelivery(PaneDelivery):
    """The pane delivery of a runner's copy: it looks at the fence right before anything is typed."""

    def __init__(
        self, target: Target, *, job_id: str, fence: Fence, ws: Workspace, settings: Settings, registry: Registry
    ) -> None:
        super().__init__(target, ws=ws, settings=settings, registry=registry)
        self.job_id, self.fence = job_id, fence

    def inject(self, text: str, ledger: Ledger, *, noted: str = "injected") -> None:
        why = self.fence.why(self.job_id)
        if why:  # the copy stops here: never typed, never reported (ToOrigin is fenced too)
            revoked = ending(Reason.REVOKED)
            ledger.apply(
                End(
                    at=now_ms(),
                    state=revoked.state,
                    reason=revoked.reason,
                    exit_code=revoked.exit_code,
                    detail=f"nothing typed: {why}",
                )
            )
            raise JobError(f"job {self.job_id} was fenced before its brief was typed: {why}", job_id=self.job_id)
        super().inject(text, ledger, noted=noted)

    def nudge(self, ledger: Ledger) -> None:
        if not self.fence.why(self.job_id):
            super().nudge(ledger)

    def type_idle(self, text: str) -> str:
        why = self.fence.why(self.job_id)
        return f"fenced: {why}" if why else super().type_idle(text)


class ToOrigin:
    """The reporter of a runner's job: what happens to the brief goes back to the origin as runner events
    (nothing once the copy is fenced: the origin's job is no longer this copy's to end)."""

    def __init__(self, ws: Workspace, registry: Registry, fence: Fence) -> None:
        self.ws, self.registry, self.fence = ws, registry, fence

    def report(self, job_id: str, type: str, body: dict[str, str]) -> None:
        if self.fence.why(job_id):
            return
        try:
            Emitter(self.ws, self.registry, None).emit(job_id, type, body, sender="runner")
        except JobError:
            pass  # the job already ended here; the origin ends by its own deadlines

    def delivered(self, ledger: Ledger) -> None:
        self.report(ledger.job.id, "delivered", {"session": ledger.job.session})

    def refused(self, ledger: Ledger, reason: Reason, detail: str) -> None:
        self.report(ledger.job.id, "rejected", {"reason": reason, "detail": detail})

    def failed(self, ledger: Ledger, reason: Reason, detail: str) -> None:
        """Ended here after delivery (reminders ran out): the origin hears a runner `error` with that reason."""
        self.report(ledger.job.id, "error", {"reason": reason, "detail": detail})


class RunnerJob:
    """A dispatched job on this host: its ledger, its attempt, and the runner's registry it closes when done."""

    def __init__(self, attempt: JobAttempt, reporter: ToOrigin, registry: Registry) -> None:
        self.attempt, self.reporter, self.registry = attempt, reporter, registry

    @classmethod
    def take(
        cls, msg: Dispatch, *, ws: Workspace, settings: Settings, runner: str, secret: str, fence: Fence
    ) -> RunnerJob:
        registry = Registry(ws)
        job = Job(
            id=msg.job_id,
            session=msg.session,
            nonce=msg.nonce,
            created_ms=msg.ts,
            start_deadline_ms=msg.start_deadline_ms,
            heartbeat_ms=msg.heartbeat_ms,
            heartbeat_k=msg.heartbeat_k,
            budget_ms=msg.budget_ms,
        )
        pid = os.getpid()
        meta = {
            "target": f"{runner}/{msg.session}",
            "kind": "remote",
            "relay": "runner",
            "runner": runner,
            "origin": msg.origin,
            "topic_prefix": msg.topic_prefix or prefix_for(settings, ws),
            "supervisor_pid": pid,
            "supervisor_start": start_time(pid) or 0,
        }
        ledger = Ledger.register(
            ws, registry, job, owner=new_owner(), meta=meta, token=msg.token(secret), epoch=msg.epoch
        )
        reporter = ToOrigin(ws, registry, fence)
        target = Target(msg.session, msg.session)
        attempt = JobAttempt(
            ledger,
            registry=registry,
            settings=settings,
            text=msg.text,  # the origin already added the footer
            delivery=lambda: FencedDelivery(
                target, job_id=msg.job_id, fence=fence, ws=ws, settings=settings, registry=registry
            ),
            events=StoreEvents(),  # events arrive by this workspace's store; the runner relays them out
            reporter=reporter,
        )
        return cls(attempt, reporter, registry)

    def fail(self, reason: Reason, detail: str) -> None:
        """End the job here and at the origin (a runner `error`) without pasting anything."""
        try:
            self.reporter.report(self.attempt.ledger.job.id, "error", {"reason": reason, "detail": detail})
            self.attempt.end(reason, detail)
        finally:
            self.registry.close()

    def drop(self) -> None:
        """Let go of a job fenced before its thread started (its copy already ended): nothing runs for it."""
        held(self.attempt.ledger.owner, False)
        self.registry.close()

    def run(self) -> Outcome:
        try:
            return self.attempt.run()
        finally:
            if self.attempt.ledger.job.state in UNCLAIMED:
                self.attempt.refuse(Reason.RUNNER_STOPPED, "the runner stopped before delivering")
            self.registry.close()
