"""One remote job on the runner's host: registered locally with the origin's deadlines and the job's
token derived from the dispatch's key nonce and MAM_DISPATCH_SECRET (it never travels),
driven by the same wrapper logic as a local job (wait for the session's turn, check the agent,
inject once, press Enter again if needed, follow the disk path), reporting `delivered` or
`rejected` back to the origin as runner events. Its events are relayed by the runner.
"""

from __future__ import annotations

import os

from mam.bus.topics import prefix_for
from mam.errors import JobError, UsageError
from mam.jobs.brief import MAX_BRIEF_BYTES, check_brief
from mam.jobs.delegate import DelegateRequest, Wrapper
from mam.jobs.emit import Emitter
from mam.jobs.ledger import Ledger, new_owner
from mam.jobs.model import Job, JobState
from mam.jobs.target import Target
from mam.remote.dispatch import Dispatch
from mam.settings import Settings
from mam.store.registry import Registry
from mam.util.proc import start_time
from mam.workspace import Workspace

BRIEF_REFUSED = "brief_refused"
FOOTER_ALLOWANCE = 4096  # the origin's footer comes on top of a brief of up to MAX_BRIEF_BYTES


def brief_problem(text: str) -> str:
    """Why a dispatched brief must not be pasted ('' if it may): the same checks as a local brief."""
    try:
        check_brief(text, max_bytes=MAX_BRIEF_BYTES + FOOTER_ALLOWANCE)
    except UsageError as e:
        return str(e)
    return ""


class RunnerJob(Wrapper):
    """The runner-side wrapper: no MQTT of its own (the runner relays), the brief pasted as sent."""

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
        req = DelegateRequest(target=msg.session, brief=msg.text, job_id=msg.job_id, kind="remote")
        return cls(
            req, Target(msg.session, msg.session), ledger, ws=ws, settings=settings, registry=registry, on_update=None
        )

    def _connect(self) -> bool:
        return True  # events arrive by this workspace's store; the runner relays them out

    def brief_text(self) -> str:
        return self.req.brief  # the origin already added the footer

    def _report(self, type: str, body: dict[str, str]) -> None:
        try:
            Emitter(self.ws, self.registry, None).emit(self.ledger.job.id, type, body, sender="runner")
        except JobError:
            pass  # the job already ended here; the origin ends by its own deadlines

    def refuse(self, reason: str, detail: str) -> None:
        self._report("rejected", {"reason": reason, "detail": detail})
        super().refuse(reason, detail)

    def fail(self, reason: str, detail: str) -> None:
        """End the job here and at the origin (a runner `error`) without pasting anything."""
        try:
            self._report("error", {"reason": reason, "detail": detail})
            self._end(JobState.FAILED, reason, 1, detail)
        finally:
            self.registry.close()

    def delivered(self) -> None:
        self._report("delivered", {"session": self.ledger.job.session})

    def end_unreported(self, state: JobState, reason: str, code: int, detail: str) -> None:
        """Reminders ran out on this host: the origin hears it as a runner `error` with that reason."""
        self._report("error", {"reason": reason, "detail": detail})
        super().end_unreported(state, reason, code, detail)

    def run(self):  # type: ignore[no-untyped-def]
        try:
            return super().run()
        finally:
            if self.ledger.job.state is JobState.PENDING:
                self.refuse("runner_stopped", "the runner stopped before delivering")
            self.registry.close()
