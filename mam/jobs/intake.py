"""Event intake for one job: MQTT messages and (for local jobs) the disk path, merged by `seq`,
checked by the gate, applied through the ledger, every rejection written to the audit log.
"""

from __future__ import annotations

import queue
import time
from dataclasses import dataclass, field

from mam.bus.envelope import Envelope
from mam.bus.mqtt import MqttClient
from mam.errors import BrokerError
from mam.jobs import record as rec
from mam.jobs.flood import RejectionLimiter, clip
from mam.jobs.gate import EventGate
from mam.jobs.ledger import Ledger
from mam.jobs.model import Event
from mam.store import jobs as jobs_table
from mam.store.registry import Registry

EXCERPT = 240
GROUP_S = 0.005


@dataclass
class Intake:
    ledger: Ledger
    registry: Registry
    local: bool  # the agent shares this workspace's store: read the disk path too
    gate: EventGate = field(init=False)
    disk_seq: int = 0
    _queue: queue.Queue[bytes | None] = field(default_factory=queue.Queue)
    _unstored: list[tuple[Envelope, str]] = field(default_factory=list)
    limiter: RejectionLimiter = field(init=False)

    def __post_init__(self) -> None:
        job = self.ledger.job
        self.gate = EventGate(job.id, self.ledger.token, last_seq=job.last_seq)
        self.disk_seq = job.last_seq
        self.limiter = RejectionLimiter(lambda kind, fields: self.ledger.note(kind, **fields))

    def flush(self) -> None:
        """Write the summary of rejections counted but not written one by one (call when done)."""
        self.limiter.flush()

    def attach(self, client: MqttClient | None, topic: str, *, timeout: float = 30.0) -> None:
        """Subscribe to the job's events. A SUBACK that is slow to come (a loaded broker or process) is
        noted, not fatal: the subscription stands once acked, and a local job also has the disk path."""
        if client is None:
            return
        try:
            client.subscribe(topic, lambda _t, payload, _r: self.feed(payload), timeout=timeout)
        except BrokerError as e:
            self.ledger.note("subscribe_slow", topic=topic, detail=str(e))

    def feed(self, payload: bytes) -> None:
        """Queue a message that arrived over MQTT (thread-safe)."""
        self._queue.put(payload)

    def wake(self) -> None:
        """End the current `pump` wait without a message (thread-safe): something else may have changed."""
        self._queue.put(None)  # no message, only a reason to look again

    def pump(self, wait: float) -> None:
        """Wait up to `wait` seconds for news, then process everything that arrived, committed as one batch."""
        messages: list[bytes | None] = []
        try:
            messages.append(self._queue.get(timeout=wait))
            # Group commit: what else arrives within GROUP_S joins this batch (one registry write for
            # a burst instead of one per event, for a few milliseconds of latency).
            until = time.monotonic() + GROUP_S
            while True:
                left = until - time.monotonic()
                messages.append(self._queue.get(timeout=left) if left > 0 else self._queue.get_nowait())
        except queue.Empty:
            pass
        with self.ledger.batch():
            try:
                # The disk path first: an event is committed to disk before it is published.
                if self.local:
                    self._drain_disk()
                for payload in messages:
                    if payload is None:
                        continue
                    self._take(payload, "mqtt")
                    if self.ledger.job.terminal:
                        break
            finally:
                self._store_remote()  # before the batch commits: stored, then applied
                self.limiter.tick()

    def _drain_disk(self) -> None:
        for row in self.registry.events_after(self.ledger.job.id, self.disk_seq):
            self.disk_seq = row.seq
            self._take(row.raw.encode("utf-8"), "disk")

    def _take(self, raw: bytes, path: str) -> None:
        verdict = self.gate.check(raw, path)
        if not verdict.accepted:
            if not verdict.silent and self.limiter.allow(verdict.reason):
                self.ledger.note(
                    "rejected",
                    reason=verdict.reason,
                    path=path,
                    detail=clip(verdict.detail),
                    excerpt=raw[:EXCERPT].decode("utf-8", "replace"),
                )
            return
        env = verdict.envelope
        assert env is not None
        if verdict.gap:
            self.ledger.note("seq_gap", missing=verdict.gap, seq=env.seq, path=path)
        if not self.local and path == "mqtt":
            self._unstored.append(
                (env, raw.decode("utf-8"))
            )  # keep remote events in the local store too (`mam job log`)
        why = self.ledger.apply(
            Event(at=rec.now_ms(), seq=env.seq, type=env.type, sender=env.sender, body=dict(env.body))
        )
        if why:  # accepted events are logged by the ledger as inputs
            self.ledger.note("ignored", reason=why, path=path, seq=env.seq, type=env.type, sender=env.sender)

    def _store_remote(self) -> None:
        if not self._unstored:
            return
        with self.registry.write() as conn:
            for env, raw in self._unstored:
                jobs_table.add_event(
                    conn,
                    job_id=env.job,
                    seq=env.seq,
                    type=env.type,
                    sender=env.sender,
                    ts=env.ts,
                    raw=raw,
                    published=True,
                )
        self._unstored.clear()
