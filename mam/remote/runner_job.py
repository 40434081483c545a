"""One remote job on the runner's host: registered locally with the origin's deadlines and the job's
token derived from the dispatch's key nonce and MAM_DISPATCH_SECRET (it never travels), driven by
a `JobAttempt` like a local job (wait for the session's turn, check the agent, inject once, press
Enter again if needed, follow the disk path) from the runner's parts: the brief pasted as sent, no
broker connection of its own (the runner relays the job's events), and `delivered` or `rejected`
reported back to the origin as runner events.
"""

from __future__ import annotations

import os

from mam.bus.topics import prefix_for
from mam.errors import JobError, UsageError
from mam.jobs.attempt import JobAttempt, StoreEvents
from mam.jobs.brief import MAX_BRIEF_BYTES, check_brief
from mam.jobs.delivery import PaneDelivery
from mam.jobs.emit import Emitter
from mam.jobs.ledger import Ledger, new_owner
from mam.jobs.model import Job
from mam.jobs.result import Outcome
from mam.jobs.target import Target
from mam.outcomes import UNCLAIMED, Reason
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


class ToOrigin:
    """The reporter of a runner's job: what happens to the brief goes back to the origin as runner events."""

    def __init__(self, ws: Workspace, registry: Registry) -> None:
        self.ws, self.registry = ws, registry

    def report(self, job_id: str, type: str, body: dict[str, str]) -> None:
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
    def take(cls, msg: Dispatch, *, ws: Workspace, settings: Settings, runner: str, secret: str) -> RunnerJob:
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
        ledger = Ledger.register(ws, registry, job, owner=new_owner(), meta=meta, token=msg.token(secret))
        reporter = ToOrigin(ws, registry)
        target = Target(msg.session, msg.session)
        attempt = JobAttempt(
            ledger,
            registry=registry,
            settings=settings,
            text=msg.text,  # the origin already added the footer
            delivery=lambda: PaneDelivery(target, ws=ws, settings=settings, registry=registry),
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

    def run(self) -> Outcome:
        try:
            return self.attempt.run()
        finally:
            if self.attempt.ledger.job.state in UNCLAIMED:
                self.attempt.refuse(Reason.RUNNER_STOPPED, "the runner stopped before delivering")
            self.registry.close()
