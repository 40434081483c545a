"""The delegation wrapper: register a job, wait for the session's turn, inject the brief once,
and follow the job's events until a protocol event or a deadline ends it.

The outcome is decided only by events and timeouts (the pure model), never by the screen;
the screen is read only to decide whether to press Enter again on a brief left unsubmitted.
"""

from __future__ import annotations

import hashlib
import logging
import math
import secrets
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from mam.bus.envelope import Envelope
from mam.bus.mqtt import MqttClient
from mam.bus.topics import Topics, prefix_for, runners_prefix_for
from mam.errors import BrokerError, MamError, UsageError
from mam.ids import check_id, check_job_id
from mam.jobs import record as rec
from mam.jobs.brief import check_brief, with_footer
from mam.jobs.delivery import Delivery, PaneDelivery
from mam.jobs.intake import Intake
from mam.jobs.ledger import Ledger, TakenOver, new_job_id, new_owner
from mam.jobs.model import (
    BROKER_UNAVAILABLE,
    SESSION_BUSY,
    TARGET_NOT_FOUND,
    Claim,
    Delivered,
    End,
    Input,
    Job,
    JobState,
    Tick,
    deadlines,
)
from mam.jobs.remind import Reminder, pane_typer
from mam.jobs.stale import close_if_abandoned
from mam.jobs.target import Target, parse_target
from mam.jobs.usage import record_usage
from mam.settings import Settings, positive_seconds
from mam.store import jobs as jobs_table
from mam.store.registry import Registry
from mam.workspace import Workspace

log = logging.getLogger(__name__)
Update = Callable[[Job, Input], None]


@dataclass(frozen=True)
class DelegateRequest:
    target: str
    brief: str
    timeout_s: float | None = None
    start_deadline_s: float | None = None
    heartbeat_s: float | None = None
    parent_job: str | None = None
    job_id: str | None = None
    kind: str = "job"
    dispatch_wait_s: float | None = None
    allow_insecure_broker: bool = False


@dataclass(frozen=True)
class Outcome:
    job_id: str
    state: str
    reason: str
    exit_code: int
    detail: str = ""
    result: str = ""
    report: str = ""
    record: dict[str, Any] = field(default_factory=dict)
    taken_over: bool = False

    def as_dict(self) -> dict[str, Any]:
        """What `mam job delegate --json` prints (and the MCP tool returns): the final record, never the token."""
        return {
            **self.record,
            "id": self.job_id,
            "state": self.state,
            "reason": self.reason,
            "exit_code": self.exit_code,
            "detail": self.detail,
            "result": self.result,
            "taken_over": self.taken_over,
        }


def delegate_request(*, target: str, brief: str | None, job_id: str | None = None, **options: Any) -> DelegateRequest:
    """A checked request from a command's options: a brief is required unless attaching to an existing `job_id`."""
    if brief is None and not job_id:
        raise UsageError("give exactly one of --brief or --brief-file")
    if job_id:
        check_job_id(job_id)
    if options.get("parent_job"):
        check_id(options["parent_job"], "parent job id")
    parse_target(target)
    return DelegateRequest(target=target, brief=brief or "", job_id=job_id, **options)


def delegate(
    req: DelegateRequest,
    *,
    ws: Workspace,
    settings: Settings,
    registry: Registry,
    on_update: Update | None = None,
    client: MqttClient | None = None,
) -> Outcome:
    """Drive one job to its end. `client`: a connected MqttClient to share between the delegations of
    one process (it is left open); without it the wrapper connects and disconnects by itself."""
    target = parse_target(req.target)
    for value in (req.job_id, req.parent_job):
        if value:
            check_job_id(value)
    if req.job_id:
        existing = registry.find_job(req.job_id)
        if existing is not None:
            return _retry(req, target, ws=ws, settings=settings, registry=registry, on_update=on_update, client=client)
    check_brief(req.brief)
    if req.dispatch_wait_s is not None and not (math.isfinite(req.dispatch_wait_s) and req.dispatch_wait_s >= 0):
        raise UsageError(f"--dispatch-wait must be a finite number of seconds, 0 or more (got {req.dispatch_wait_s})")
    job = _new_job(req, target, settings)  # checks the deadlines before anything is written
    if req.parent_job and registry.find_job(req.parent_job) is None:
        raise UsageError(f"--parent-job {req.parent_job!r}: no such job in workspace {ws.root}")
    token, key_nonce = None, ""
    if target.remote:
        from mam.remote.dispatch import check_remote_allowed
        from mam.remote.job_key import job_key, new_key_nonce

        secret = check_remote_allowed(settings, ws, allow_insecure=req.allow_insecure_broker)
        key_nonce = new_key_nonce()
        token = job_key(secret, job.id, key_nonce)  # the runner derives it too: it never goes on the wire
    meta = {
        "target": target.text,
        "kind": req.kind,
        "parent_job": req.parent_job,
        "topic_prefix": prefix_for(settings, ws),
        "runner": target.runner,
        "brief_sha256": hashlib.sha256(req.brief.encode("utf-8")).hexdigest(),
        "brief_bytes": len(req.brief.encode("utf-8")),
        "workspace": str(ws.root),
    }
    if key_nonce:
        meta["key_nonce"] = key_nonce
    ledger = Ledger.register(ws, registry, job, owner=new_owner(), meta=meta, token=token)
    return Wrapper(
        req, target, ledger, ws=ws, settings=settings, registry=registry, on_update=on_update, client=client
    ).run()


def _new_job(req: DelegateRequest, target: Target, settings: Settings) -> Job:
    def pick(value: float | None, key: str, flag: str) -> float:
        # nan, inf and values under a millisecond would crash int() or reach the footer as 0.
        return positive_seconds(value, flag) if value is not None else settings.get_float(key)

    return Job(
        id=req.job_id or new_job_id(),
        session=f"{target.runner}/{target.session}" if target.remote else target.session,
        nonce=secrets.token_hex(8),
        created_ms=rec.now_ms(),
        start_deadline_ms=int(pick(req.start_deadline_s, "MAM_START_DEADLINE_S", "--start-deadline") * 1000),
        heartbeat_ms=int(pick(req.heartbeat_s, "MAM_HEARTBEAT_S", "--heartbeat") * 1000),
        heartbeat_k=settings.get_float("MAM_HEARTBEAT_K"),
        budget_ms=int(pick(req.timeout_s, "MAM_JOB_TIMEOUT_S", "--timeout") * 1000),
    )


def _retry(
    req: DelegateRequest,
    target: Target,
    *,
    ws: Workspace,
    settings: Settings,
    registry: Registry,
    on_update: Update | None,
    client: MqttClient | None = None,
) -> Outcome:
    """A second attempt for an existing job id: report a finished job, else take it over (never re-inject)."""
    row = registry.job(req.job_id or "")
    if not row.open:
        return outcome_from_row(ws, registry, row.id)
    ledger = Ledger.take_over(ws, registry, row.id)
    return Wrapper(
        req, target, ledger, ws=ws, settings=settings, registry=registry, on_update=on_update, client=client
    ).run()


def outcome_from_row(ws: Workspace, registry: Registry, job_id: str) -> Outcome:
    row = registry.job(job_id)
    job = Job.from_dict(row.data.get("job", {}))
    record = {**job.as_dict(), **row.data.get("meta", {}), "owner": row.owner}
    code = row.exit_code if row.exit_code is not None else -1
    return Outcome(job_id, row.state, row.reason, code, job.detail, job.result, job.report, record)


class Wrapper:
    """One attempt at driving one job to its end."""

    def __init__(
        self,
        req: DelegateRequest,
        target: Target,
        ledger: Ledger,
        *,
        ws: Workspace,
        settings: Settings,
        registry: Registry,
        on_update: Update | None,
        client: MqttClient | None = None,
    ) -> None:
        self.req, self.target, self.ledger = req, target, ledger
        self.ws, self.settings, self.registry = ws, settings, registry
        self.on_update = on_update
        self.topics = Topics(str(ledger.meta["topic_prefix"]), runners_prefix_for(settings))
        self.client: MqttClient | None = client
        self.owns_client = client is None
        self.intake = Intake(ledger, registry, local=not target.remote)
        self.delivery: Delivery | None = None
        self.poll = settings.poll_s
        if on_update is not None:
            ledger.on_commit = on_update

    # -- the run ------------------------------------------------------------------------------
    def run(self) -> Outcome:
        try:
            self._run()
        except TakenOver:
            out = outcome_from_row(self.ws, self.registry, self.ledger.job.id)
            return Outcome(
                out.job_id,
                out.state,
                out.reason,
                5,
                "taken over by another attempt",
                out.result,
                out.report,
                out.record,
                True,
            )
        except BaseException as e:
            self._abandon(e)
            raise
        finally:
            if not self.target.remote:
                record_usage(self.ws, self.registry, self.ledger)  # the CLI's own records of the job's turns
            try:
                self.ledger.refresh_record(now=True)
            except OSError as e:
                log.warning("job %s: live record not refreshed: %s", self.ledger.job.id, e)
            if self.client is not None:
                self._publish_state()
                if self.owns_client:
                    self.client.close()
                else:
                    self.client.unsubscribe(self.topics.events(self.ledger.job.id))
        return self.outcome()

    def _abandon(self, error: BaseException) -> None:
        """This attempt crashed: end the job rather than leave it open under a living process."""
        if self.ledger.job.terminal or isinstance(error, KeyboardInterrupt):
            return  # on Ctrl-C the job stays open: a retry with --job-id, or the monitor, takes it over
        try:
            self._end(JobState.FAILED, "wrapper_error", 1, f"{type(error).__name__}: {error}")
        except MamError as e:
            log.warning("job %s could not be ended after the wrapper failed: %s", self.ledger.job.id, e)

    def _connect(self) -> bool:
        """Connect and subscribe to the job's events; False (job ended, exit 3) if no broker answers."""
        try:
            from mam.bus.connect import open_client

            if self.client is None:
                # A refused connection fails at once; a loaded broker gets time to send its CONNACK.
                self.client = open_client(self.settings, self.ws, role="wrapper", timeout=30)
            elif not self.client.connected and not self.client.wait_connected(30):
                raise BrokerError("the shared MQTT connection is down")
        except BrokerError as e:
            self._end(JobState.FAILED, BROKER_UNAVAILABLE, 3, str(e))
            return False
        self.intake.attach(self.client, self.topics.events(self.ledger.job.id))
        return True

    def _run(self) -> None:
        job = self.ledger.job
        if job.terminal or not self._connect():
            return
        delivery = self._delivery()
        self.delivery = delivery
        try:
            if self.ledger.job.state is JobState.PENDING:
                if not self._deliver(delivery):
                    return
            self._follow(delivery)
        finally:
            delivery.finish(self.ledger)

    def _deliver(self, delivery: Delivery) -> bool:
        problem = delivery.find_target()
        if problem:
            self.refuse(TARGET_NOT_FOUND, problem)
            return False
        if not self._wait_turn():
            return False
        problem = delivery.check_alive()
        if problem:
            self.refuse(TARGET_NOT_FOUND, problem)
            return False
        self._apply(Claim(rec.now_ms()))
        text = self.brief_text()
        try:
            delivery.inject(text, self.ledger)
        except MamError as e:
            self.refuse("inject_failed", str(e))
            return False
        if not delivery.confirms_itself:
            self._apply(Delivered(rec.now_ms()))
            self.delivered()
        return True

    # Hooks for a runner driving a job on behalf of another host.
    def brief_text(self) -> str:
        job = self.ledger.job
        return with_footer(self.req.brief, job.id, job.nonce, job.heartbeat_ms / 1000)

    def refuse(self, reason: str, detail: str) -> None:
        """The brief was not (or could not be) delivered: the job is cancelled (exit 5)."""
        self._end(JobState.CANCELLED, reason, 5, detail)

    def delivered(self) -> None:
        """Called once the brief is in the pane."""

    def end_unreported(self, state: JobState, reason: str, code: int, detail: str) -> None:
        """The reminders ran out (mam.jobs.remind): end the job."""
        self._end(state, reason, code, detail)

    def _delivery(self) -> Delivery:
        if self.target.remote:
            from mam.remote.dispatch import RemoteDelivery

            assert self.client is not None
            return RemoteDelivery(
                self.target,
                ws=self.ws,
                settings=self.settings,
                client=self.client,
                topics=self.topics,
                brief=self.req.brief,
            )
        return PaneDelivery(self.target, ws=self.ws, settings=self.settings, registry=self.registry)

    def _wait_turn(self) -> bool:
        """Wait by the registry until no earlier job of the session is open; False if it ended the job."""
        wait = (
            self.req.dispatch_wait_s
            if self.req.dispatch_wait_s is not None
            else self.settings.get_float("MAM_DISPATCH_WAIT_S")
        )
        deadline = time.monotonic() + wait
        announced = False
        while True:
            with self.registry.read() as conn:
                ahead = jobs_table.open_jobs_ahead(conn, self.ledger.job.session, self.ledger.qid)
            for other in ahead:
                close_if_abandoned(self.ws, self.registry, other.id)
            if not ahead:
                return True
            if not announced:
                rec.audit(self.ws, self.ledger.job.id, "waiting", ahead=[j.id for j in ahead])
                announced = True
            if time.monotonic() >= deadline:
                self.refuse(SESSION_BUSY, f"session busy with {ahead[0].id} for {wait:g}s")
                return False
            self.ledger.sync()
            if self.ledger.job.terminal:
                return False
            time.sleep(self.poll)

    def _follow(self, delivery: Delivery) -> None:
        reminder = Reminder(self.ledger, self.settings, pane_typer(delivery), self.end_unreported)
        while not self.ledger.job.terminal:
            self.intake.pump(self.poll)
            if self.ledger.job.terminal:
                break
            self.ledger.sync()
            if self.ledger.job.terminal:
                break
            if self.ledger.job.state is JobState.DELIVERED:
                delivery.nudge(self.ledger)
            elif self.ledger.job.state is JobState.RUNNING:
                delivery.keep_heartbeat(self.ledger)
            reminder.check()  # the agent's turn ended without a report: remind it, or end the job
            if self.ledger.job.terminal:
                break
            now = rec.now_ms()
            if (
                self.target.remote
                and self.client is not None
                and not self.client.connected
                and any(now > d for d, _s, _r in deadlines(self.ledger.job))
            ):
                self._end(
                    JobState.FAILED, BROKER_UNAVAILABLE, 3, "the broker was unreachable when the job's deadline passed"
                )
                break
            self._apply(Tick(now))
        self.intake.flush()

    # -- helpers ------------------------------------------------------------------------------
    def _apply(self, inp: Claim | Delivered | Tick | End) -> None:
        self.ledger.apply(inp)

    def _end(self, state: JobState, reason: str, code: int, detail: str) -> None:
        self._apply(End(rec.now_ms(), state, reason, code, detail))

    def _publish_state(self) -> None:
        job = self.ledger.job
        if self.client is None or not self.client.connected or not self.ledger.token:
            return
        env = Envelope(
            kind="state",
            job=job.id,
            seq=job.last_seq,
            type="state",
            sender="wrapper",
            ts=rec.now_ms(),
            body={"state": job.state.value, "reason": job.reason, "exit_code": job.exit_code},
        ).signed(self.ledger.token)
        try:
            self.client.publish(self.topics.state(job.id), env.encode(), qos=1, retain=True, timeout=3)
        except BrokerError as e:
            log.warning("could not publish the final state of %s: %s", job.id, e)

    def outcome(self) -> Outcome:
        job = self.ledger.job
        code = job.exit_code if job.exit_code is not None else 1
        record = {k: v for k, v in self.ledger.record().items() if k != "token"}
        return Outcome(job.id, job.state.value, job.reason, code, job.detail, job.result, job.report, record)
