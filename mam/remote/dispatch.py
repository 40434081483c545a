"""Dispatch messages (origin -> runner) and the origin side of a `remote:RUNNER/SESSION` job.

A dispatch is a retained QoS 1 message on `<runners prefix>/runners/<runner>/dispatch/<job>`, an
envelope of kind `dispatch` signed with MAM_DISPATCH_SECRET. It never carries the job's token:
only the key nonce from which both hosts derive it with the secret (mam/remote/job_key.py). It
still carries the brief, hence it is refused on an insecure broker connection.

It carries the job's fencing epoch (`body.epoch`; absent reads as 0). An origin that took a job over
after its brief was typed sends it again at the raised epoch (a re-dispatch): the runner that holds
the job moves its copy to that epoch and types nothing; its events from the older epoch are refused.

Until the runner's `delivered` arrives, the origin sends the dispatch again, 5 s after it and then at
doubling intervals up to 30 s: a runner cut off when it went out, whose retained read on its return
comes back without it (a clustered broker), still gets it. A runner takes a job id once: a copy of a
dispatch it took is a duplicate there, and nothing is typed twice.
"""

from __future__ import annotations

import hashlib
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from mam.broker.endpoint import configured_endpoint
from mam.bus.envelope import EPOCH, MAX_DISPATCH_BYTES, Envelope, epoch_of
from mam.bus.mqtt import MqttClient
from mam.bus.topics import Topics, check_prefix
from mam.errors import BrokerError, DecodeError, JobError, MamError, Unacknowledged, UsageError
from mam.ids import check_job_id, check_name, check_nonce
from mam.jobs import record as rec
from mam.jobs.ledger import Ledger
from mam.jobs.target import Target
from mam.outcomes import JobState, Rejected
from mam.remote.job_key import KEY_NONCE, job_key
from mam.settings import MAKE_SECRET, Settings
from mam.workspace import Workspace

PRESENCE_WAIT_S = 3.0
PRESENCE_READS = 3  # fresh subscriptions to the presence topic, one per slice of PRESENCE_WAIT_S
OFFLINE_POLL_S = 1.0  # a runner that is offline is looked at again this often, within the job's dispatch wait
RESEND_FIRST_S = 5.0  # a dispatch its runner has not confirmed (`delivered`) is sent again after this...
RESEND_MAX_S = 30.0  # ...and then at doubling intervals up to this


def check_remote_allowed(settings: Settings, ws: Workspace, *, allow_insecure: bool) -> str:
    """Return the dispatch secret, or raise if remote dispatch must not happen here."""
    secret = settings.dispatch_secret
    if not secret:
        raise UsageError(
            f"remote jobs need MAM_DISPATCH_SECRET (the same value on this host and on the runner's): {MAKE_SECRET}"
        )
    endpoint = configured_endpoint(settings)
    if not allow_insecure and (endpoint is None or not endpoint.secured):
        raise UsageError(
            "remote dispatch carries the brief: refusing to send it over a broker connection with neither TLS nor "
            "authentication (configure MQTT_TLS / MQTT_USERNAME, or pass --allow-insecure-broker)"
        )
    return secret


@dataclass(frozen=True)
class Dispatch:
    job_id: str
    runner: str
    session: str
    text: str  # the brief with its footer, pasted as is
    key_nonce: str  # with the secret and the job id, gives the job's token (never sent)
    nonce: str
    ts: int
    start_deadline_ms: int
    heartbeat_ms: int
    heartbeat_k: float
    budget_ms: int
    origin: str
    topic_prefix: str = ""  # the origin's job prefix: where the runner sends the job's events ("" = its own)
    epoch: int = 0  # the job's fencing epoch at the origin: the runner's events carry it back

    def encode(self, secret: str) -> bytes:
        body: dict[str, Any] = {
            "runner": self.runner,
            "session": self.session,
            "text": self.text,
            "key_nonce": self.key_nonce,
            "nonce": self.nonce,
            "start_deadline_ms": self.start_deadline_ms,
            "heartbeat_ms": self.heartbeat_ms,
            "heartbeat_k_milli": int(self.heartbeat_k * 1000),
            "budget_ms": self.budget_ms,
            "origin": self.origin,
            EPOCH: self.epoch,
        }
        if self.topic_prefix:
            body["topic_prefix"] = self.topic_prefix
        return (
            Envelope(kind="dispatch", job=self.job_id, seq=0, type="dispatch", sender="origin", ts=self.ts, body=body)
            .signed(secret)
            .encode()
        )

    def token(self, secret: str) -> str:
        """The job's token, derived here exactly as the origin derived it."""
        return job_key(secret, self.job_id, self.key_nonce)

    @classmethod
    def open(cls, raw: bytes, *, secret: str, runner: str, now_ms: int, freshness_ms: int) -> Dispatch:
        """Decode and check a dispatch; raise DecodeError(reason=...) for anything this runner must not take."""
        env = Envelope.decode(raw, max_bytes=MAX_DISPATCH_BYTES)
        if env.kind != "dispatch" or env.type != "dispatch":
            raise DecodeError(f"not a dispatch ({env.kind}/{env.type})", reason=Rejected.WRONG_KIND)
        if not env.verify(secret):
            raise DecodeError("dispatch signature does not match MAM_DISPATCH_SECRET", reason=Rejected.BAD_SIGNATURE)
        b = env.body
        if b.get("runner") != runner:
            raise DecodeError(f"dispatch is for runner {b.get('runner')!r}", reason=Rejected.WRONG_RUNNER)
        if abs(now_ms - env.ts) > freshness_ms:
            raise DecodeError(
                f"dispatch is {abs(now_ms - env.ts) / 1000:.0f}s from now, outside the freshness window",
                reason=Rejected.STALE,
            )
        try:  # ids name files and rows on this host: checked before anything exists
            check_job_id(env.job)
            check_name(b.get("session"))
        except UsageError as e:
            raise DecodeError(f"dispatch refused: {e}", reason=Rejected.BAD_ID) from e
        _check_shape(b)
        if not isinstance(b.get("key_nonce"), str) or not KEY_NONCE.match(b["key_nonce"]):
            raise DecodeError("dispatch has no key_nonce of 32 lower-case hex digits", reason=Rejected.BAD_SHAPE)
        try:
            return cls(
                job_id=env.job,
                runner=str(b["runner"]),
                session=str(b["session"]),
                text=str(b["text"]),
                key_nonce=b["key_nonce"],
                nonce=str(b["nonce"]),
                ts=env.ts,
                start_deadline_ms=int(b["start_deadline_ms"]),
                heartbeat_ms=int(b["heartbeat_ms"]),
                heartbeat_k=int(b["heartbeat_k_milli"]) / 1000,
                budget_ms=int(b["budget_ms"]),
                origin=str(b.get("origin", "")),
                topic_prefix=check_prefix(b["topic_prefix"]) if "topic_prefix" in b else "",
                epoch=epoch_of(env),
            )
        except (KeyError, TypeError, ValueError, UsageError) as e:
            raise DecodeError(f"dispatch body is malformed: {e}", reason=Rejected.BAD_SHAPE) from e


INTS = ("start_deadline_ms", "heartbeat_ms", "heartbeat_k_milli", "budget_ms")
ORIGIN_MAX = 4096


def _check_shape(b: Mapping[str, Any]) -> None:
    """Every field that can reach a pane (the nonce, typed by a reminder), a log line or a terminal
    (origin) has its shape checked before the dispatch is taken: DecodeError `bad_shape` otherwise.
    The brief itself gets `check_brief` (a signed job ends `brief_refused`)."""
    try:
        check_nonce(b.get("nonce"))
    except UsageError as e:
        raise DecodeError(f"dispatch refused: {e}", reason=Rejected.BAD_SHAPE) from e
    origin = b.get("origin", "")
    if not isinstance(origin, str) or len(origin) > ORIGIN_MAX or not origin.isprintable():
        raise DecodeError(
            f"dispatch refused: origin must be printable text of at most {ORIGIN_MAX} characters",
            reason=Rejected.BAD_SHAPE,
        )
    if not isinstance(b.get("text"), str):
        raise DecodeError("dispatch refused: text is not a string", reason=Rejected.BAD_SHAPE)
    for key in INTS:
        value = b.get(key)
        if type(value) is not int or not 0 <= value < 2**53:
            raise DecodeError(f"dispatch refused: {key} is not a whole number below 2^53", reason=Rejected.BAD_SHAPE)


class RemoteDelivery:
    """The origin side: check the runner is online, publish the dispatch (again while the runner has not
    confirmed it), clear it when done."""

    confirms_itself = True  # the runner's `delivered` event marks delivery

    def __init__(
        self, target: Target, *, ws: Workspace, settings: Settings, client: MqttClient, topics: Topics, brief: str
    ) -> None:
        self.target, self.ws, self.settings, self.client, self.topics = target, ws, settings, client, topics
        self.secret = settings.dispatch_secret
        self.brief = brief
        self._published: str | None = None
        self._sent = ""  # the text of the last dispatch: what a re-send sends again
        self._resend_at: float | None = None  # time.monotonic() of the next re-send, once a dispatch went out
        self._resend_step = RESEND_FIRST_S
        self._resends = 0

    def find_target(self, wait_s: float = 0.0) -> str:
        """'' when the runner is online with the session; a runner that said it is offline is waited for up
        to `wait_s` (the job's dispatch wait): its node back, the dispatch goes out then, once. A broker
        that leaves the look unanswered is asked again within the same wait, then it is a BrokerError."""
        deadline = time.monotonic() + wait_s
        while True:
            problem, passing = self._look()
            left = deadline - time.monotonic()
            if passing == "unanswered" and left <= 0:
                raise BrokerError(problem)  # as any other broker that does not answer: exit 3
            if not passing or left <= 0:
                return problem
            time.sleep(min(OFFLINE_POLL_S, left))

    def _look(self) -> tuple[str, str]:
        """What stands in the way of a dispatch ('' for nothing), and what may pass with time ('' for
        neither): the runner said it is "offline", or the broker left the look "unanswered" (a NATS cluster
        that lost a node can hold a new subscription's SUBACK for more than 5 s: docs/broker.md)."""
        runner = self.target.runner or ""
        seen = threading.Event()
        presence: list[Envelope] = []

        def on_presence(_topic: str, payload: bytes, _retained: bool) -> None:
            try:
                env = Envelope.decode(payload)
            except DecodeError:
                return
            # Only a presence that names this runner is its own: another runner's, signed with the same secret
            # and replayed on this runner's topic by a broker user, says nothing about this one.
            if env.kind == "presence" and env.verify(self.secret) and env.job == runner == env.body.get("runner"):
                presence.append(env)
                seen.set()

        # A clustered broker may answer a new subscription without the retained presence (NATS with a node
        # down: about half of them, docs/broker.md): read it again on a fresh subscription, PRESENCE_READS
        # times within PRESENCE_WAIT_S, before calling the runner unknown.
        topic = self.topics.presence(runner)
        deadline = time.monotonic() + PRESENCE_WAIT_S
        unanswered = 0
        for _ in range(PRESENCE_READS):
            try:
                if not self.client.subscribe(topic, on_presence, timeout=PRESENCE_WAIT_S):
                    unanswered += 1  # refused (a NATS node without a JetStream leader): nothing would come
                seen.wait(max(0.0, min(PRESENCE_WAIT_S / PRESENCE_READS, deadline - time.monotonic())))
            except BrokerError:  # no SUBACK in time: the handler still hears a late answer until unsubscribed
                unanswered += 1
            finally:
                self.client.unsubscribe(topic, on_presence)  # other looks at this runner (other jobs) go on
            if seen.is_set():
                break
        if not presence and unanswered:
            return (
                f"the MQTT broker refused or did not acknowledge {unanswered} of {PRESENCE_READS} subscriptions "
                f"to runner {runner!r}'s presence within {PRESENCE_WAIT_S:g}s each"
            ), "unanswered"
        if not presence:
            return (
                f"runner {runner!r} has never announced itself on this broker "
                "(is it running? same MAM_DISPATCH_SECRET and MAM_TOPIC_PREFIX on both hosts?)"
            ), ""
        if presence[-1].type != "online":
            body = presence[-1].body
            return (
                f"runner {runner!r} is offline (it said so as host {body.get('host')!r}, pid {body.get('pid')})",
                "offline",
            )
        # A live runner says it is online every 2 s; an older "online" (a replay, or a runner that died without
        # its will) counts only within the window a dispatch itself must be in (clocks of two hosts differ).
        age_s = time.time() - presence[-1].ts / 1000
        if abs(age_s) > self.settings.dispatch_freshness_s:
            return (
                f"runner {runner!r} last said it is online {age_s:.0f}s ago (MAM_DISPATCH_FRESHNESS_S "
                f"{self.settings.dispatch_freshness_s:g}): not heard since",
                "offline",
            )
        sessions = presence[-1].body.get("sessions")
        if isinstance(sessions, list) and self.target.session not in sessions:
            return f"runner {runner!r} has no running session {self.target.session!r}", ""
        return "", ""

    def check_alive(self) -> str:
        return ""  # the runner checks its own agent before it injects

    def inject(self, text: str, ledger: Ledger) -> None:
        size = len(text.encode("utf-8"))
        try:
            self._dispatch(text, ledger)
        except Unacknowledged as e:  # maybe sent (a loaded broker): the runner may type it, so it is not
            # "not delivered"; its `delivered` event, or the start deadline if it never arrives, ends the wait
            ledger.note("dispatch_unacked", runner=self.target.runner or "", session=self.target.session, detail=str(e))
            self._sent_again_later(text)
            return
        ledger.note("dispatched", runner=self.target.runner or "", session=self.target.session, bytes=size)
        self._sent_again_later(text)

    def _sent_again_later(self, text: str) -> None:
        self._sent = text
        self._resend_at = time.monotonic() + self._resend_step
        self._resend_step = min(self._resend_step * 2, RESEND_MAX_S)

    def rejoin(self, text: str, ledger: Ledger) -> None:
        """Taken over after the brief was typed: dispatch the job again at this attempt's epoch, so the runner
        that holds it moves its copy on (and types nothing) and the job can still complete. The brief goes
        along only when it is the job's own (its sha256): a runner that never took the first dispatch types it
        then; without it, such a runner refuses the re-dispatch (`brief_refused`)."""
        own = bool(self.brief) and hashlib.sha256(self.brief.encode("utf-8")).hexdigest() == ledger.meta.get(
            "brief_sha256"
        )
        try:
            self._dispatch(text if own else "", ledger)
        except MamError as e:  # its events stay fenced; the job ends by its own deadlines
            ledger.note("redispatch_failed", runner=self.target.runner or "", epoch=ledger.epoch, detail=str(e))
            return
        ledger.note("redispatched", runner=self.target.runner or "", epoch=ledger.epoch, brief=own)
        self._sent_again_later(text if own else "")

    def _dispatch(self, text: str, ledger: Ledger) -> None:
        job = ledger.job
        key_nonce = str(ledger.meta.get("key_nonce") or "")
        if not KEY_NONCE.match(key_nonce):  # a job registered by a mam older than protocol 2
            raise JobError(
                f"job {job.id} has no key nonce (registered by an older mam): delegate it again", job_id=job.id
            )
        msg = Dispatch(
            job_id=job.id,
            runner=self.target.runner or "",
            session=self.target.session,
            text=text,
            key_nonce=key_nonce,
            nonce=job.nonce,
            ts=rec.now_ms(),
            start_deadline_ms=job.start_deadline_ms,
            heartbeat_ms=job.heartbeat_ms,
            heartbeat_k=job.heartbeat_k,
            budget_ms=job.budget_ms,
            origin=str(self.ws.root),
            topic_prefix=self.topics.prefix,
            epoch=ledger.epoch,
        )
        topic = self.topics.dispatch(msg.runner, job.id)
        self._published = topic  # even if the publish raises: it may still reach the broker, so `finish` clears it
        self.client.publish(topic, msg.encode(self.secret), qos=1, retain=True, timeout=10)

    def nudge(self, ledger: Ledger) -> None:
        """While the runner has not confirmed the dispatch (the job `delivering`): send it again when due. (It
        presses Enter again on its side: nothing to do here once the job is `delivered`.)"""
        if ledger.job.state is not JobState.DELIVERING or self._resend_at is None:
            return
        if time.monotonic() < self._resend_at:
            return
        self._sent_again_later(self._sent)
        try:
            self._dispatch(self._sent, ledger)
        except Unacknowledged:  # maybe sent: counted as sent
            pass
        except MamError:  # not connected: the next one goes when it is due
            return
        self._resends += 1
        ledger.note("dispatch_resent", runner=self.target.runner or "", epoch=ledger.epoch, count=self._resends)

    def keep_heartbeat(self, ledger: Ledger) -> None:
        return None  # the runner keeps the heartbeater alive on its side

    def due(self, ledger: Ledger) -> float | None:
        return self._resend_at if ledger.job.state is JobState.DELIVERING else None

    def finish(self, ledger: Ledger) -> None:
        """Never leave a retained dispatch behind (e.g. the runner never took it)."""
        if self._published and self.client.connected:
            try:
                self.client.publish(self._published, b"", qos=1, retain=True, timeout=3)
            except BrokerError:
                pass
