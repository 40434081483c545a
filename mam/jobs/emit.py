"""The agent side: sign an event with the job's token, record it in the local store, hand it on.

The store write comes first and allocates `seq` under a per-job lock. The event then goes to the
wrapper that waits for it: a poke of the job's `events:<id>` key (mam.util.pokes) makes it read the
store and relay the signed event to MQTT, so this process opens no broker connection. Only when no
wrapper heard the poke does the emitter poke `job:<id>` (whoever follows the job from outside reads
the store at once), connect (paho is imported then) and publish itself, holding the lock until the
broker acknowledged, so events leave in `seq` order. When the broker is down too, the event stays
on disk (a wrapper that takes the job over reads it there) and the caller is told so. A remote
job's events wait in the store for the runner's relay, each with the epoch of the runner's copy
(`body.epoch`, signed with the rest: the origin refuses an older one). This is the one module that writes job
events (`mam event`, the heartbeater, hooks); it imports neither paho nor click nor YAML.
"""

from __future__ import annotations

import fcntl
from collections.abc import Callable, Iterator, Mapping
from contextlib import AbstractContextManager, contextmanager
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any, Protocol

from mam.bus.envelope import EPOCH, MAX_EVENT_BYTES, Envelope
from mam.bus.topics import Topics
from mam.errors import BrokerError, EventTooLarge, JobError
from mam.jobs.record import now_ms, read_record
from mam.store import jobs as jobs_table
from mam.store.db import Database
from mam.util import pokes
from mam.workspace import Workspace

if TYPE_CHECKING:
    import sqlite3

    from mam.bus.mqtt import MqttClient

CUT_MARKER = "\n[mam: cut here to fit the 64 KiB event limit; the whole text is in the file at report_path]"


# Where an emitted event went after the store: what `mam event` prints.
TO_WRAPPER = "wrapper"  # the local wrapper heard the poke: it relays the event to MQTT
TO_BROKER = "broker"  # published by this process (no wrapper listened), acknowledged
TO_RUNNER = "runner"  # a remote job: this host's runner relays it
ON_DISK = "disk"  # neither: on disk only, for a wrapper that takes the job over


@dataclass(frozen=True)
class Emitted:
    envelope: Envelope
    published: bool  # this process published it and the broker acknowledged
    warning: str = ""
    cut: bool = False  # the `fit` field was cut (with CUT_MARKER) so the signed envelope fits
    via: str = ON_DISK


class Store(Protocol):
    """What the emitter writes through: the Registry, or a bare Database (DatabaseStore)."""

    def write(self) -> AbstractContextManager[sqlite3.Connection]: ...


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
    """Emits events for jobs of one workspace: pokes their wrapper, else publishes over one MQTT client.

    `client`: a connected client to publish with when no wrapper listens; `connect`: how to get one
    then, only when needed (mam.bus.opener); with neither, such an event stays on disk only."""

    def __init__(
        self,
        ws: Workspace,
        registry: Store,
        client: MqttClient | None = None,
        records: dict[str, dict[str, Any]] | None = None,
        *,
        publish_timeout: float = 5.0,
        connect: Callable[[], MqttClient] | None = None,
    ) -> None:
        self.ws = ws
        self.publish_timeout = publish_timeout  # the job lock is held while waiting for the broker's ack
        self.registry = registry
        self.client = client
        self.connect = connect
        self.opened: MqttClient | None = None  # a client `connect` opened: the caller closes it (`close`)
        self._records: dict[str, dict[str, Any]] = dict(records or {})  # job records the caller already read

    def record(self, job_id: str) -> dict[str, Any]:
        if job_id not in self._records:
            self._records[job_id] = read_record(self.ws, job_id)
        return self._records[job_id]

    def close(self) -> None:
        """Close the client this emitter opened itself, if any."""
        if self.opened is not None:
            self.opened.close()
            if self.client is self.opened:
                self.client = None
            self.opened = None

    def emit(
        self, job_id: str, type: str, body: Mapping[str, Any], *, sender: str = "agent", fit_field: str | None = None
    ) -> Emitted:
        """Sign, record and hand on one event. `fit_field`: the body field that may be cut (see `fit`)
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
                fields = dict(body)
                if relayed(record):  # a runner's side of a remote job: the origin fences it by the epoch
                    fields[EPOCH] = row.epoch
                env = Envelope(kind="event", job=job_id, seq=seq, type=type, sender=sender, ts=now_ms(), body=fields)
                env, cut = fit(env, fit_field)  # raising here rolls the seq back: nothing recorded
                env = env.signed(token)
                # `published` means "nothing left to relay": only a remote job's events wait for the runner's relay;
                # a local job's wrapper reads them from this store (and relays them to MQTT).
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
            via, warning = self._hand_on(record, env)
        return Emitted(env, via == TO_BROKER, warning, cut, via)

    def _hand_on(self, record: Mapping[str, Any], env: Envelope) -> tuple[str, str]:
        heard = pokes.poke(self.ws, [pokes.events_key(env.job)])  # the job's wrapper, if it listens
        if not heard:  # whoever follows the job from outside (`mam job wait`, the session's next job) looks
            pokes.poke(self.ws, [pokes.job_key(env.job)])
        if relayed(record):
            return TO_RUNNER, ""  # a remote job: the runner relays this workspace's events in seq order
        if heard:
            return TO_WRAPPER, ""
        # No wrapper listens (it died, or the job is followed from elsewhere): publish it ourselves, so
        # observers and a monitor taking the job over see it on MQTT.
        if self.client is None and self.connect is not None:
            try:
                self.client = self.opened = self.connect()
            except BrokerError as e:
                self.connect = None  # one try per emitter: the next event must not wait for it again
                return ON_DISK, f"{e}; the event is recorded on disk"
        if self.client is None:
            return ON_DISK, "no broker connection: the event is recorded on disk only"
        try:
            self.client.publish(
                Topics(str(record["topic_prefix"])).events(env.job),
                env.encode(),
                qos=1,
                timeout=self.publish_timeout,
                give_up_on_disconnect=True,
            )  # on disk already; the lock waits on this
        except BrokerError as e:
            return ON_DISK, f"{e}; the event is recorded on disk"
        return TO_BROKER, ""


class DatabaseStore:
    """A bare Database as the emitter's Store: no sessions, no YAML mirror (`mam event`, the heartbeater)."""

    def __init__(self, ws: Workspace) -> None:
        ws.ensure_state()
        self.db = Database(ws.db_path)

    def write(self) -> AbstractContextManager[sqlite3.Connection]:
        return self.db.transaction()

    def close(self) -> None:
        self.db.close()


def store_received(conn: sqlite3.Connection, events: list[tuple[Envelope, str]]) -> None:
    """Store events of a remote job as they arrived over MQTT (signed by the emitter on the runner's host)."""
    for env, raw in events:
        jobs_table.add_event(
            conn, job_id=env.job, seq=env.seq, type=env.type, sender=env.sender, ts=env.ts, raw=raw, published=True
        )


def note_relayed(conn: sqlite3.Connection, job_id: str, seq: int) -> None:
    """Note that a runner relayed the event to the broker."""
    jobs_table.mark_published(conn, job_id, seq)
