"""The agent side: sign an event with the job's token, record it in the local store, publish it.

The store write comes first and allocates `seq`; a per-job lock is held from the allocation
until the broker acknowledged the publish, so events leave in `seq` order. When the broker
is down the event stays on disk (the wrapper reads that path too) and is marked unpublished.
"""

from __future__ import annotations

import fcntl
import logging
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, replace
from typing import Any

from mam.bus.envelope import MAX_EVENT_BYTES, Envelope
from mam.bus.mqtt import MqttClient
from mam.bus.topics import Topics
from mam.errors import BrokerError, EventTooLarge, JobError
from mam.jobs.record import now_ms, read_record
from mam.store import jobs as jobs_table
from mam.store.registry import Registry
from mam.workspace import Workspace

log = logging.getLogger(__name__)
CUT_MARKER = "\n[mam: cut here to fit the 64 KiB event limit; the whole text is in the file at report_path]"


@dataclass(frozen=True)
class Emitted:
    envelope: Envelope
    published: bool
    warning: str = ""
    cut: bool = False  # the `fit` field was cut (with CUT_MARKER) so the signed envelope fits


def fit(env: Envelope, field: str | None, *, limit: int = MAX_EVENT_BYTES) -> tuple[Envelope, bool]:
    """`env` (unsigned or signed: a signature's length is fixed) cut to fit `limit` bytes once encoded.

    Only `body[field]` may be cut; it keeps the longest prefix that fits, then CUT_MARKER. The
    encoded size is what counts: JSON escapes a control character (ESC in coloured output) as six
    bytes, so a text's own size says little. Raises EventTooLarge if even an empty `field` is too big.
    """
    sized = replace(env, sig=env.sig or "0" * 64)
    size = len(sized.encode())
    if size <= limit:
        return env, False
    text = env.body.get(field) if field else None
    if field is None or not isinstance(text, str) or not text:
        raise EventTooLarge(
            f"the {env.type} event would be {size} bytes once signed; the limit is {limit}", job_id=env.job
        )
    key = field

    def fits(n: int) -> bool:
        return len(replace(sized, body={**sized.body, key: text[:n] + CUT_MARKER}).encode()) <= limit

    if not fits(0):
        raise EventTooLarge(f"the {env.type} event does not fit {limit} bytes even without its {field}", job_id=env.job)
    lo, hi = 0, len(text)  # fits(lo) holds; find the largest such n (the size grows with n)
    while lo < hi:
        mid = (lo + hi + 1) // 2
        lo, hi = (mid, hi) if fits(mid) else (lo, mid - 1)
    return replace(env, body={**env.body, field: text[:lo] + CUT_MARKER}), True


@contextmanager
def job_lock(ws: Workspace, job_id: str) -> Iterator[None]:
    ws.locks_dir.mkdir(mode=0o700, parents=True, exist_ok=True)
    with open(ws.lock(f"job-{job_id}"), "a") as f:
        fcntl.flock(f.fileno(), fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(f.fileno(), fcntl.LOCK_UN)


def relayed(record: Mapping[str, Any]) -> bool:
    """True when this workspace's runner, not the agent, publishes the job's events."""
    return record.get("relay") == "runner"


class Emitter:
    """Emits events for jobs of one workspace, over one (optional) MQTT client."""

    def __init__(
        self,
        ws: Workspace,
        registry: Registry,
        client: MqttClient | None,
        records: dict[str, dict[str, Any]] | None = None,
        *,
        publish_timeout: float = 5.0,
    ) -> None:
        self.ws = ws
        self.publish_timeout = publish_timeout  # the job lock is held while waiting for the broker's ack
        self.registry = registry
        self.client = client
        self._records: dict[str, dict[str, Any]] = dict(records or {})  # job records the caller already read

    def record(self, job_id: str) -> dict[str, Any]:
        if job_id not in self._records:
            self._records[job_id] = read_record(self.ws, job_id)
        return self._records[job_id]

    def emit(
        self, job_id: str, type: str, body: Mapping[str, Any], *, sender: str = "agent", fit_field: str | None = None
    ) -> Emitted:
        """Sign, record and publish one event. `fit_field`: the body field that may be cut (see `fit`)
        so the event fits the wire; an event that cannot fit raises EventTooLarge, with nothing recorded."""
        record = self.record(job_id)
        token = record.get("token")
        if not isinstance(token, str) or not token:
            raise JobError(f"the record of job {job_id!r} holds no token", job_id=job_id)
        with job_lock(self.ws, job_id):
            with self.registry.write() as conn:
                row = jobs_table.get(conn, job_id)
                if not row.open:  # ended; read off the row so `mam event` never imports the job model
                    raise JobError(
                        f"job {job_id} already ended: {row.state} ({row.reason or 'no reason'})", job_id=job_id
                    )
                seq = jobs_table.next_seq(conn, job_id)
                env = Envelope(
                    kind="event", job=job_id, seq=seq, type=type, sender=sender, ts=now_ms(), body=dict(body)
                )
                env, cut = fit(env, fit_field)  # raising here rolls the seq back: nothing recorded
                env = env.signed(token)
                # `published` means "nothing left to relay": only a remote job's events wait for the runner's relay;
                # a local job's wrapper reads them from this store, so they need no second write.
                jobs_table.add_event(
                    conn,
                    job_id=job_id,
                    seq=seq,
                    type=type,
                    sender=sender,
                    ts=env.ts,
                    raw=env.encode().decode("utf-8"),
                    published=not relayed(record),
                )
            published, warning = self._publish(record, env)
        return Emitted(env, published, warning, cut)

    def _publish(self, record: Mapping[str, Any], env: Envelope) -> tuple[bool, str]:
        if relayed(record):
            return False, ""  # a remote job: the runner relays this workspace's events in seq order
        if self.client is None:
            return False, "no broker connection: the event is recorded on disk only"
        try:
            self.client.publish(
                Topics(str(record["topic_prefix"])).events(env.job),
                env.encode(),
                qos=1,
                timeout=self.publish_timeout,
                give_up_on_disconnect=True,
            )  # on disk already; the lock waits on this
        except BrokerError as e:
            return False, f"{e}; the event is recorded on disk"
        return True, ""
