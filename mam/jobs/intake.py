"""Event intake for one job: MQTT messages and (for local jobs) the disk path, merged by `seq`,
checked by the gate, applied through the ledger, every rejection written to the audit log.

A local job's intake is woken through the attempt's one Waiter (mam.util.pokes): `mam event` commits
the event to the store and pokes the job's `events:<id>` key, and the intake reads the store at once
and relays each event it accepts from there to MQTT (signed by the agent, unchanged) for observers
and a monitor. The echo of such a relay, which comes back on the job's subscription, wakes nothing: it
waits for the next pump, where the gate notes it as the silent duplicate it is (so a third copy, an
attacker's replay, is still a `replay`).

A remote job's origin fences its runner by the job's epoch: a signed event from an older epoch (a runner
cut off while the job was taken over) changes nothing; it gets one `stale_epoch` audit line and one log
line, and `on_stale` tells that runner to stop (the origin's revoke, mam.jobs.attempt).
"""

from __future__ import annotations

import logging
import queue
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from mam.bus.envelope import Envelope, epoch_of
from mam.bus.mqtt import SUBSCRIBE_RETRY_S, MqttClient
from mam.errors import BrokerError, DecodeError
from mam.jobs import emit
from mam.jobs import record as rec
from mam.jobs.flood import RejectionLimiter, clip
from mam.jobs.gate import Admission, EventGate
from mam.jobs.ledger import Ledger
from mam.jobs.model import Event
from mam.outcomes import Rejected
from mam.store.registry import Registry

log = logging.getLogger(__name__)

EXCERPT = 240
WAKE = b""  # queued on a poke: read the store (no MQTT message is ever empty and valid)


@dataclass
class Intake:
    ledger: Ledger
    registry: Registry
    local: bool  # the agent shares this workspace's store: read the disk path too
    gate: EventGate = field(init=False)
    disk_seq: int = 0
    _queue: queue.Queue[bytes] = field(default_factory=queue.Queue)
    _unstored: list[tuple[Envelope, str]] = field(default_factory=list)
    _refused_rows: set[int] = field(default_factory=set)  # disk rows the gate refused: never read again
    limiter: RejectionLimiter = field(init=False)
    _relay: tuple[MqttClient, str] | None = None  # where events accepted from the disk path are relayed
    _relayed: dict[bytes, int] = field(default_factory=dict)  # relayed -> seq, their echo not back yet (under _lock)
    _echoes: list[int] = field(default_factory=list)  # the seqs whose echo came back, for the next pump (under _lock)
    _lock: threading.Lock = field(default_factory=threading.Lock)
    on_stale: Callable[[int], None] | None = None  # told the epoch of each stale event (the origin's revoke)

    def __post_init__(self) -> None:
        job = self.ledger.job
        epoch = self.ledger.epoch if self.ledger.fenced else None
        self.gate = EventGate(job.id, self.ledger.token, last_seq=job.last_seq, epoch=epoch)
        self.disk_seq = job.last_seq
        self.limiter = RejectionLimiter(lambda kind, fields: self.ledger.note(kind, **fields))

    def flush(self) -> None:
        """Write the summary of rejections counted but not written one by one (call when done)."""
        self.limiter.flush()

    def attach(self, client: MqttClient | None, topic: str, *, timeout: float = 30.0) -> str:
        """Subscribe to the job's events; '' once the subscription stands, else what is wrong. A refused
        SUBACK is asked again until granted. A remote job's events come only this way, and the broker keeps
        nothing for a subscription made late, so its dispatch waits for a granted SUBACK: refused, or not
        acknowledged, within `timeout` is a problem (exit 3, nothing dispatched; at 500 sessions on a NATS
        cluster 587 jobs were typed and completed on their runners while their origin, its SUBACK late,
        heard none of it and ended them agent_blocked). A local job waits for no SUBACK: it also has the
        disk path, and the client asks again by itself if the broker refuses."""
        if client is None:
            return ""
        deadline = time.monotonic() + timeout
        problem = ""
        try:
            # A local job waits for no SUBACK before its brief is typed: its events come by the store too, and
            # the client asks again by itself if the broker refuses. (A wait here is a round trip per job, and
            # ~40 ms more where the broker delays small packets: Mosquitto without set_tcp_nodelay.)
            granted = client.subscribe(topic, self._on_message, timeout=timeout, wait=not self.local)
            while not granted:  # (asked again: the same handler, told once)
                if time.monotonic() >= deadline:
                    problem = f"the MQTT broker refused the subscription to the job's events for {timeout:g}s"
                    break
                time.sleep(SUBSCRIBE_RETRY_S)
                granted = client.subscribe(topic, self._on_message, timeout=max(0.1, deadline - time.monotonic()))
        except BrokerError as e:  # no SUBACK within the wait (or no connection to ask on)
            self.ledger.note("subscribe_slow", topic=topic, detail=str(e))
            if not self.local:
                problem = f"the job's events subscription does not stand: {e}"
        if self.local:
            self._relay = (client, topic)
        return problem

    def _on_message(self, _topic: str, payload: bytes, _retained: bool) -> None:
        self.feed(payload)

    def feed(self, payload: bytes) -> None:
        """Queue a message that arrived over MQTT (thread-safe); the echo of an event this intake relayed
        wakes nothing (it was taken from the store already): it waits for the next pump."""
        with self._lock:
            seq = self._relayed.pop(payload, None)
            if seq is not None:
                self._echoes.append(seq)
                return
        self._queue.put(payload)

    def wake(self) -> None:
        """End the current `pump` wait without a message (thread-safe): something else may have changed."""
        self._queue.put(WAKE)  # no message, only a reason to look again

    def pump(self, wait: float) -> None:
        """Wait up to `wait` seconds for news, then process everything that arrived, committed as one batch."""
        messages: list[bytes] = []
        try:
            messages.append(self._queue.get(timeout=wait))
            # Group commit: what is queued already joins this batch (one registry write for a burst). It
            # waits for nothing more: an agent sends its events one command at a time, so a wait for
            # company (5 ms once) only added to every event's latency.
            while True:
                messages.append(self._queue.get_nowait())
        except queue.Empty:
            pass
        with self.ledger.batch():
            try:
                # The disk path first: an event is committed to disk before it is published.
                if self.local:
                    self._drain_disk()
                with self._lock:
                    echoes, self._echoes = self._echoes, []
                for seq in echoes:  # the very bytes accepted from the store: the gate notes their MQTT copy
                    self.gate.seen_on(seq, "mqtt")
                for payload in messages:
                    if payload is WAKE or not payload:
                        continue  # the disk path was read above
                    self._take(payload, "mqtt")
                    if self.ledger.job.terminal:
                        break
            finally:
                self._store_remote()  # before the batch commits: stored, then applied
                self.limiter.tick()

    def _drain_disk(self) -> None:
        """Read the job's rows after the last one verified. A row's `seq` column is only a hint: the
        disk path moves on past a row only once its envelope passed the gate (signature, then seq)
        and carries that same seq. Any other row is rejected once and remembered, never trusted: a
        row with a high seq written into the registry cannot make the real events below it unread."""
        for row in self.registry.events_after(self.ledger.job.id, self.disk_seq):
            if row.seq in self._refused_rows:
                continue
            raw = row.raw.encode("utf-8")
            try:
                claimed = Envelope.decode(raw, max_bytes=self.gate.max_bytes).seq
            except DecodeError as e:
                self._refused_rows.add(row.seq)
                self._reject(e.reason, "disk", str(e), raw)
                continue
            if claimed != row.seq:
                self._refused_rows.add(row.seq)
                self._reject(Rejected.BAD_SHAPE, "disk", f"row seq {row.seq} holds an envelope of seq {claimed}", raw)
                continue
            verdict = self._take(raw, "disk")
            if verdict.accepted or verdict.silent:  # silent: the same signed event, already taken over MQTT
                self.disk_seq = max(self.disk_seq, row.seq)
            else:
                self._refused_rows.add(row.seq)

    def _reject(self, reason: str, path: str, detail: str, raw: bytes) -> None:
        if self.limiter.allow(reason):
            self.ledger.note(
                "rejected",
                reason=reason,
                path=path,
                detail=clip(detail),
                excerpt=raw[:EXCERPT].decode("utf-8", "replace"),
            )

    def _take(self, raw: bytes, path: str) -> Admission:
        verdict = self.gate.check(raw, path)
        if verdict.reason == Rejected.STALE_EPOCH and verdict.envelope is not None:
            self._stale(verdict.envelope, path)
            return verdict
        if not verdict.accepted:
            if not verdict.silent and self.limiter.allow(verdict.reason):
                self.ledger.note(
                    "rejected",
                    reason=verdict.reason,
                    path=path,
                    detail=clip(verdict.detail),
                    excerpt=raw[:EXCERPT].decode("utf-8", "replace"),
                )
            return verdict
        env = verdict.envelope
        assert env is not None
        if verdict.gap:
            self.ledger.note("seq_gap", missing=verdict.gap, seq=env.seq, path=path)
        if path == "disk" and self._relay is not None:
            self._relay_out(raw, env.seq)
        if not self.local and path == "mqtt":
            self._unstored.append(
                (env, raw.decode("utf-8"))
            )  # keep remote events in the local store too (`mam job log`)
        why = self.ledger.apply(
            Event(at=rec.now_ms(), seq=env.seq, type=env.type, sender=env.sender, body=dict(env.body))
        )
        if why:  # accepted events are logged by the ledger as inputs
            self.ledger.note("ignored", reason=why, path=path, seq=env.seq, type=env.type, sender=env.sender)
        return verdict

    def _stale(self, env: Envelope, path: str) -> None:
        """A signed event from a fenced copy of the job: noted and logged, the job unchanged, its sender revoked."""
        stale = epoch_of(env)  # the gate read it already
        if self.limiter.allow(Rejected.STALE_EPOCH):
            self.ledger.note(
                "stale_epoch", epoch=stale, job_epoch=self.ledger.epoch, seq=env.seq, type=env.type[:40], path=path
            )
            log.warning(
                "job %s: refused a %s event (seq %d) from epoch %d; the job is at epoch %d",
                env.job,
                env.type[:40],
                env.seq,
                stale,
                self.ledger.epoch,
            )
        if self.on_stale is not None:
            self.on_stale(stale)

    def _relay_out(self, raw: bytes, seq: int) -> None:
        """Publish an event accepted from the store (its agent woke us instead of publishing it), in seq order."""
        assert self._relay is not None
        client, topic = self._relay
        with self._lock:
            self._relayed[raw] = seq
        try:
            client.publish_nowait(topic, raw, qos=1)
        except BrokerError as e:
            with self._lock:
                self._relayed.pop(raw, None)
            self.ledger.note("relay_failed", detail=str(e))

    def _store_remote(self) -> None:
        if not self._unstored:
            return
        with self.registry.write() as conn:
            emit.store_received(conn, self._unstored)
        self._unstored.clear()
