"""The receiving gate: every incoming job event is checked here before the job model sees it.

Checks, in order: size, JSON, shape and protocol version, kind, job id, HMAC signature with
the job's token, sender allowed for the type, the fencing epoch (for a remote job's origin: an
event from an older epoch than the job's is `stale_epoch` and uses up no `seq`; one from a newer epoch,
which this attempt never issued, is `future_epoch`: only a token holder can sign it, and a copy at a
newer epoch belongs to an attempt that superseded this one), and `seq`
(strictly higher than any accepted and at most SEQ_WINDOW ahead of it; a gap is accepted and
reported; a replay, out-of-order or out-of-window event is rejected). The same event
arriving once by the disk path and once over MQTT is a duplicate, not a replay.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from mam.bus.envelope import MAX_EVENT_BYTES, Envelope, epoch_of
from mam.errors import DecodeError
from mam.jobs.model import SENDER_TYPES
from mam.outcomes import Rejected

MAX_REMEMBERED = 10_000
SEQ_WINDOW = 10_000  # how far ahead of the last accepted seq an event may be; further is `out_of_window`


@dataclass(frozen=True)
class Admission:
    accepted: bool
    reason: str = ""  # why it was rejected ('' when accepted)
    envelope: Envelope | None = None
    gap: int = 0  # events missing between the last accepted one and this one
    silent: bool = False  # a harmless duplicate: not worth an audit line

    @property
    def detail(self) -> str:
        env = self.envelope
        # type and sender come from the wire (a rejected event may be unsigned): keep them short
        return f"seq={env.seq} type={env.type[:40]} sender={env.sender[:40]}" if env else ""


@dataclass
class EventGate:
    job_id: str
    token: str
    max_bytes: int = MAX_EVENT_BYTES
    last_seq: int = 0
    epoch: int | None = None  # the job's epoch, where events must carry it (a remote job's origin); None: unchecked
    _seen: dict[int, tuple[str, set[str]]] = field(default_factory=dict)

    def check(self, raw: bytes | str, path: str = "mqtt") -> Admission:
        try:
            env = Envelope.decode(raw, max_bytes=self.max_bytes)
        except DecodeError as e:
            return Admission(accepted=False, reason=e.reason)
        if env.kind != "event":
            return Admission(accepted=False, reason=Rejected.WRONG_KIND, envelope=env)
        if env.job != self.job_id:
            return Admission(accepted=False, reason=Rejected.WRONG_JOB, envelope=env)
        if not env.verify(self.token):
            return Admission(accepted=False, reason=Rejected.BAD_SIGNATURE, envelope=env)
        if env.type not in SENDER_TYPES.get(env.sender, frozenset()):
            return Admission(accepted=False, reason=Rejected.SENDER_NOT_ALLOWED, envelope=env)
        if self.epoch is not None:
            try:
                said = epoch_of(env)
            except DecodeError as e:
                return Admission(accepted=False, reason=e.reason, envelope=env)
            if said < self.epoch:  # signed, but by a copy that was fenced: its seq stays free for the live one
                return Admission(accepted=False, reason=Rejected.STALE_EPOCH, envelope=env)
            if said > self.epoch:
                return Admission(accepted=False, reason=Rejected.FUTURE_EPOCH, envelope=env)
        seen = self._seen.get(env.seq)
        if seen is not None:
            sig, paths = seen
            if sig == env.sig and path not in paths:
                paths.add(path)
                return Admission(accepted=False, reason=Rejected.DUPLICATE, envelope=env, silent=True)
            return Admission(accepted=False, reason=Rejected.REPLAY, envelope=env)
        if env.seq <= self.last_seq:
            return Admission(accepted=False, reason=Rejected.OUT_OF_ORDER, envelope=env)
        if env.seq > self.last_seq + SEQ_WINDOW:  # accepting it would make every later real event out_of_order
            return Admission(accepted=False, reason=Rejected.OUT_OF_WINDOW, envelope=env)
        gap = env.seq - self.last_seq - 1
        self.last_seq = env.seq
        self._seen[env.seq] = (env.sig, {path})
        if len(self._seen) > MAX_REMEMBERED:
            for old in sorted(self._seen)[: len(self._seen) - MAX_REMEMBERED]:
                del self._seen[old]
        return Admission(accepted=True, envelope=env, gap=gap)

    def seen_on(self, seq: int, path: str) -> None:
        """The event accepted as `seq` came again by `path`, as the very bytes accepted (an intake's own relay,
        echoed by the broker): a silent duplicate, noted without decoding it again, so a later copy by that
        path is a replay."""
        seen = self._seen.get(seq)
        if seen is not None:
            seen[1].add(path)
