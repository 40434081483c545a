"""The delegation wrapper: register a job (or take an open one over) and drive it to its end with a
`JobAttempt` (mam/jobs/attempt.py) put together from the parts its target needs.

A local target gets a pane delivery and the broker plus the disk path for its events. A
`remote:RUNNER/SESSION` target gets its delivery and its job key from `remote`, the origin side
that mam.remote supplies (`mam.remote.origin.ORIGIN`): this package never imports mam.remote.

Registering a job needs the store and the job model only; what drives it (the attempt, the MQTT
client, the pane backends: mam.jobs.attempt and mam.jobs.delivery) is imported once the job is
registered, so `mam job delegate` registers its job without paying for them first.
"""

from __future__ import annotations

import difflib
import hashlib
import secrets
import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any, Protocol

from mam.bus.topics import Topics, prefix_for, runners_prefix_for
from mam.errors import SessionNotFound, UsageError
from mam.ids import check_id, check_job_id
from mam.jobs import record as rec
from mam.jobs.attach import check_key, dedup_key, wait_attached
from mam.jobs.brief import TASK_KIND, check_brief, with_footer
from mam.jobs.ledger import Ledger, TakenOver, held, new_job_id, new_owner
from mam.jobs.model import Input, Job
from mam.jobs.request import OPTIONS, check_values
from mam.jobs.result import Outcome, outcome_from_row, taken_over_outcome
from mam.jobs.target import Target, parse_target
from mam.settings import Settings, positive_seconds
from mam.store.jobs import JobRow
from mam.store.registry import Registry
from mam.util import interrupts
from mam.workspace import Workspace

if TYPE_CHECKING:
    from mam.bus.mqtt import MqttClient
    from mam.jobs.attempt import JobAttempt
    from mam.jobs.delivery import Delivery

Update = Callable[[Job, Input | None], None]  # None: the job unchanged, what it waits for did
REQUEST_FIELDS = frozenset(o.name for o in OPTIONS if o.request)  # the request's fields that are options
__all__ = [
    "DelegateRequest",
    "Outcome",
    "RemoteOrigin",
    "delegate",
    "delegate_request",
    "outcome_from_row",
]


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
    idempotency_key: str = ""  # checked; `--dedup` derives it (mam.jobs.attach.dedup_key)
    max_tokens: int | None = None  # stop the job once its measured usage passes this (mam.governor)
    estimate_tokens: int | None = None  # its reservation against the token budgets (else the role's median)
    detach: bool = False  # return once the brief is delivered; the job stays open (`mam job wait` follows it)
    follow_s: float | None = None  # stop following after this long, the job left open (`mam job wait --timeout`)
    # A wait's take-over: the owner it found gone. The job is taken from that owner only (a compare-and-set on
    # it), never from one that took it since (two waits in one node, a `--detach`ed job's follower among them).
    taking_from: str = ""


class RemoteOrigin(Protocol):
    """The origin side of `remote:RUNNER/SESSION` jobs, supplied by mam.remote (mam.remote.origin.ORIGIN)."""

    def job_key(self, settings: Settings, ws: Workspace, job_id: str, *, allow_insecure: bool) -> tuple[str, str]:
        """(the job's token, the key nonce the runner derives it from); UsageError where remote jobs may not go."""
        ...

    def delivery(
        self, target: Target, *, ws: Workspace, settings: Settings, client: MqttClient, topics: Topics, brief: str
    ) -> Delivery: ...


def delegate_request(
    *,
    target: str,
    brief: str | None,
    job_id: str | None = None,
    idempotency_key: str | None = None,
    dedup: bool = False,
    **options: Any,
) -> DelegateRequest:
    """A checked request from a command's options (mam.jobs.request.OPTIONS): a brief is required unless
    attaching to an existing `job_id`. `dedup`: the idempotency key is derived from the target session and
    the brief."""
    unknown = set(options) - REQUEST_FIELDS
    if unknown:
        raise TypeError(f"delegate_request: not options of a delegation: {sorted(unknown)}")
    check_values(options)
    if brief is None and not job_id:
        raise UsageError("give exactly one of --brief or --brief-file")
    if job_id:
        check_job_id(job_id)
    if options.get("parent_job"):
        check_id(options["parent_job"], "parent job id")
    if options.get("kind") is None:
        options.pop("kind", None)  # not given: the request's own default
    else:
        check_id(options["kind"], "kind")
    parsed = parse_target(target)
    key = ""
    if idempotency_key is not None:
        if dedup:
            raise UsageError("give at most one of --idempotency-key and --dedup")
        key = check_key(idempotency_key)
    elif dedup:
        if brief is None:
            raise UsageError("--dedup needs the brief (--brief or --brief-file)")
        key = dedup_key(_session_of(parsed), brief)
    return DelegateRequest(target=target, brief=brief or "", job_id=job_id, idempotency_key=key, **options)


def _session_of(target: Target) -> str:
    return f"{target.runner}/{target.session}" if target.remote else target.session


def delegate(
    req: DelegateRequest,
    *,
    ws: Workspace,
    settings: Settings,
    registry: Registry,
    on_update: Update | None = None,
    client: MqttClient | None = None,
    remote: RemoteOrigin | None = None,
    on_attach: Callable[[str, bool], None] | None = None,
    on_registered: Callable[[Job], None] | None = None,
    client_pid: int | None = None,
) -> Outcome:
    """Drive one job to its end (the node's attempt: mam.node.service; `req` as `delegate_request` checked it).
    `client`: a connected MqttClient to share between the delegations of
    one process (it is left open); without it the wrapper connects and disconnects by itself.
    `remote`: the origin side of remote jobs (required for a `remote:` target).

    With an idempotency key that still names a job, nothing is made or injected: the call attaches
    to that job (`on_attach(its id, whether it is still open)`), waits for its end and returns its
    outcome (`attached`). `on_registered(job)`: once the job this call drives exists (made, or taken
    over), before anything is delivered, called in the same uninterruptible step (mam.util.interrupts),
    so an interrupt after it always knows the job. `client_pid`: the process the node runs the delegation for
    (while it lives, it may run the delegation again in the next node: mam.jobs.stale); None when the
    attempt runs in the caller's own process."""
    target = parse_target(req.target)
    if target.remote and remote is None:
        raise UsageError(f"{target.text}: remote targets are not available here")
    if req.job_id:
        existing = registry.find_job(req.job_id)
        if existing is not None:
            if not existing.open:  # a second attempt for an ended job reports it
                return outcome_from_row(registry, existing.id)
            # An open one is taken over, never injected again; one not yet typed only with its own brief.
            _check_take_over(existing, target, req.brief)
            with interrupts.held():
                try:
                    ledger = Ledger.take_over(ws, registry, existing.id, expected=req.taking_from or None)
                except TakenOver:  # another attempt took it first: it drives the job
                    return taken_over_outcome(registry, existing.id)
                _tell_registered(on_registered, ledger)
            return _attempt(req, target, ledger, ws, settings, registry, on_update, client, remote).run()
    check_brief(req.brief)
    job = _new_job(req, target, settings)  # checks the deadlines before anything is written
    if req.parent_job and registry.find_job(req.parent_job) is None:
        raise UsageError(f"--parent-job {req.parent_job!r}: no such job in workspace {ws.root}")
    tokens = _token_options(req)
    if not target.remote:
        check_known_session(registry, target.session)  # a wrong name leaves no job record behind
    token, key_nonce = None, ""
    if remote is not None and target.remote:  # the runner derives the token too: it never goes on the wire
        token, key_nonce = remote.job_key(settings, ws, job.id, allow_insecure=req.allow_insecure_broker)
    meta: dict[str, Any] = {
        "target": target.text,
        "kind": req.kind,
        "parent_job": req.parent_job,
        "topic_prefix": prefix_for(settings, ws),
        "runner": target.runner,
        "brief_sha256": hashlib.sha256(req.brief.encode("utf-8")).hexdigest(),
        "brief_bytes": len(req.brief.encode("utf-8")),
        "workspace": str(ws.root),
        "idempotency_key": req.idempotency_key or None,
        # The node runs it for a client: while that client lives, it takes an untyped job over (mam.jobs.stale).
        # Always present, so a record has the same fields wherever the attempt ran.
        "client": new_owner(client_pid) if client_pid is not None else None,
    }
    if key_nonce:
        meta["key_nonce"] = key_nonce
    meta.update(tokens)
    with interrupts.held():
        made = Ledger.register_keyed(
            ws,
            registry,
            job,
            owner=new_owner(),
            meta=meta,
            token=token,
            key=req.idempotency_key,
            key_ttl_s=settings.idempotency_ttl_s,
        )
        if isinstance(made, Ledger):
            _tell_registered(on_registered, made)
    if not isinstance(made, Ledger):
        if on_attach is not None:
            on_attach(made.id, made.open)
        if req.detach:  # the job is another call's: nothing to deliver here
            return replace(outcome_from_row(registry, made.id), attached=True)
        return wait_attached(registry, made.id)
    return _attempt(req, target, made, ws, settings, registry, on_update, client, remote).run()


def _tell_registered(on_registered: Callable[[Job], None] | None, ledger: Ledger) -> None:
    """`on_registered(job)`; if it fails, no attempt will drive the job: this process lets go of it, so whoever
    looks next closes it (`wrapper_died`) rather than leave it held, and open, for as long as the node lives."""
    if on_registered is None:
        return
    try:
        on_registered(ledger.job)
    except BaseException:
        held(ledger.owner, False)
        raise


def _check_take_over(existing: JobRow, target: Target, brief: str) -> None:
    """UsageError unless `--job-id` names the job's own target and, for a job whose brief was not typed
    yet (the one taking it over types it), the same brief: a take-over never types another text or an
    empty brief, nor into another session."""
    meta = existing.data.get("meta", {})
    own = parse_target(str(meta.get("target") or existing.target))
    if (own.session, own.runner) != (target.session, target.runner):
        raise UsageError(f"--job-id {existing.id}: that job's target is {own.text}, not {target.text}")
    untyped = Job.from_dict(existing.data.get("job", {})).untyped
    if untyped and hashlib.sha256(brief.encode("utf-8")).hexdigest() != meta.get("brief_sha256"):
        raise UsageError(
            f"--job-id {existing.id}: its brief was not typed yet, so taking it over needs the same brief "
            "(--brief or --brief-file, the text it was delegated with); to follow it: mam job wait "
            f"{existing.id}"
        )


def check_known_session(registry: Registry, name: str) -> None:
    """SessionNotFound (exit 5) naming the sessions there are, and the closest one, if `name` is not one."""
    if registry.find_session(name) is not None:
        return
    names = sorted(row.name for row in registry.sessions())
    if not names:
        raise SessionNotFound(
            f"no session named {name!r} in this workspace (it has none: create one with `mam session create`)",
            session=name,
        )
    close = difflib.get_close_matches(name, names, n=1, cutoff=0.5)
    shown = ", ".join(names[:20]) + (f" and {len(names) - 20} more" if len(names) > 20 else "")
    hint = f"; did you mean {close[0]}?" if close else ""
    raise SessionNotFound(f"no session named {name!r} in this workspace (sessions: {shown}){hint}", session=name)


def _attempt(
    req: DelegateRequest,
    target: Target,
    ledger: Ledger,
    ws: Workspace,
    settings: Settings,
    registry: Registry,
    on_update: Update | None,
    client: MqttClient | None,
    remote: RemoteOrigin | None,
) -> JobAttempt:
    """The attempt for this host's side of a job: its brief with the footer, its delivery, its events.
    The job's owner is held by this process from its registration (mam.jobs.ledger.held); an attempt
    that cannot even be made lets go of it."""
    try:
        from mam.jobs.attempt import BrokerEvents, JobAttempt  # slow to import (see the module's doc)
        from mam.jobs.delivery import PaneDelivery  # slow to import: the pane backends and the agents
    except BaseException:
        held(ledger.owner, False)
        raise

    topics = Topics(str(ledger.meta["topic_prefix"]), runners_prefix_for(settings))
    events = BrokerEvents(ws=ws, settings=settings, topics=topics, client=client, reads_store=not target.remote)
    if on_update is not None:
        ledger.on_commit = on_update

    def delivery() -> Delivery:
        if remote is not None and target.remote:
            assert events.client is not None  # made once the events' connection is open
            return remote.delivery(
                target, ws=ws, settings=settings, client=events.client, topics=topics, brief=req.brief
            )
        return PaneDelivery(target, ws=ws, settings=settings, registry=registry)

    job = ledger.job
    return JobAttempt(
        ledger,
        registry=registry,
        settings=settings,
        text=with_footer(req.brief, job.id, job.nonce, job.heartbeat_ms / 1000, task=req.kind == TASK_KIND),
        delivery=delivery,
        events=events,
        dispatch_wait_s=req.dispatch_wait_s,
        detach=req.detach,
        stop_at=None if req.follow_s is None else time.monotonic() + req.follow_s,
    )


def _token_options(req: DelegateRequest) -> dict[str, int]:
    """--max-tokens and --estimate-tokens (checked by check_values), for the job's meta (mam.governor)."""
    return {
        name: value
        for name, value in (("max_tokens", req.max_tokens), ("estimate_tokens", req.estimate_tokens))
        if value is not None
    }


def _new_job(req: DelegateRequest, target: Target, settings: Settings) -> Job:
    def pick(value: float | None, default: float, flag: str) -> float:
        # nan, inf and values under a millisecond would crash int() or reach the footer as 0.
        return positive_seconds(value, flag) if value is not None else default

    return Job(
        id=req.job_id or new_job_id(),
        session=_session_of(target),
        nonce=secrets.token_hex(8),
        created_ms=rec.now_ms(),
        start_deadline_ms=int(pick(req.start_deadline_s, settings.start_deadline_s, "--start-deadline") * 1000),
        heartbeat_ms=int(pick(req.heartbeat_s, settings.heartbeat_s, "--heartbeat") * 1000),
        heartbeat_k=settings.heartbeat_k,
        budget_ms=int(pick(req.timeout_s, settings.job_timeout_s, "--timeout") * 1000),
    )
