"""The signed envelope every mam message travels in, its canonical JSON and its HMAC.

Canonical form (what is signed): the envelope without `sig`, as JSON with keys sorted,
no whitespace, non-ASCII as raw UTF-8, no floating-point numbers anywhere (times are
integer milliseconds) and at most MAX_DEPTH levels of nesting, so any language can
reproduce the bytes. See MESSAGING.md.
"""

from __future__ import annotations

import hashlib
import hmac
import json
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from mam.errors import DecodeError
from mam.outcomes import Rejected

VERSION = 2  # 2: a dispatch carries `key_nonce`, never the job token
MAX_EVENT_BYTES = 64 * 1024
MAX_DISPATCH_BYTES = 1024 * 1024
MAX_DEPTH = 32  # JSON nesting, counting the envelope object as level 1 and `body` as level 2
MAX_INT = 2**53  # integers stay below this in magnitude: exact in every JSON reader, and in SQLite's 64 bits
MAX_BOARD_BYTES = 1024 * 1024  # a board value is at most 64 KiB of text; escaped JSON may be several times that
KINDS = ("event", "state", "dispatch", "presence", "board")
EPOCH = "epoch"  # the body field of a job's fencing epoch (a dispatch, a runner's event, a state, a revoke)
REVOKE = "revoke"  # the type of the `state` message by which an origin tells a fenced runner to stop its copy
_FIELDS = {"v", "kind", "job", "seq", "type", "sender", "ts", "body", "sig"}


def canonical(obj: Mapping[str, Any]) -> bytes:
    """The signed bytes of `obj`; raises DecodeError for what the wire cannot carry (see `check_tree`)."""
    check_tree(obj)
    return json.dumps(obj, sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False).encode("utf-8")


def check_tree(value: Any) -> None:
    """Reject floats, integers of MAX_INT or more in magnitude, nesting deeper than MAX_DEPTH and
    text UTF-8 cannot encode (lone surrogates).

    Iterative on purpose: a receiver must refuse a deeply nested message with a DecodeError, never
    hit Python's recursion limit later when it re-encodes the message to check its signature.
    """
    stack: list[tuple[Any, int]] = [(value, 1)]
    while stack:
        item, depth = stack.pop()
        kind = type(item)  # exact types first: this runs twice per received event (decode, verify)
        if kind is str:
            if not item.isascii():
                _check_text(item)
        elif kind is int:
            if not -MAX_INT < item < MAX_INT:
                raise DecodeError(
                    f"integer of {item.bit_length()} bits in a signed envelope (the limit is 2^53)",
                    reason=Rejected.BAD_SHAPE,
                )
        elif kind is bool or item is None:
            continue
        elif isinstance(item, str):
            _check_text(item)
        elif isinstance(item, float):
            raise DecodeError(
                f"floating-point number {item!r} in a signed envelope (use integers)", reason=Rejected.BAD_SHAPE
            )
        elif isinstance(item, int):
            if not -MAX_INT < item < MAX_INT:
                raise DecodeError(
                    f"integer of {item.bit_length()} bits in a signed envelope (the limit is 2^53)",
                    reason=Rejected.BAD_SHAPE,
                )
        elif kind is dict or kind is list or isinstance(item, (Mapping, list, tuple)):
            if depth > MAX_DEPTH:
                raise DecodeError(f"JSON nested deeper than {MAX_DEPTH} levels", reason=Rejected.BAD_SHAPE)
            if isinstance(item, Mapping):
                for key, child in item.items():
                    if isinstance(key, str):
                        _check_text(key)
                    stack.append((child, depth + 1))
            else:
                stack.extend((child, depth + 1) for child in item)


def _check_text(text: str) -> None:
    if not text.isascii():
        try:
            text.encode("utf-8")
        except UnicodeEncodeError as e:
            raise DecodeError(
                "text holds a lone UTF-16 surrogate, which is not valid UTF-8", reason=Rejected.NOT_JSON
            ) from e


def sign(key: str, data: bytes) -> str:
    return hmac.new(key.encode("utf-8"), data, hashlib.sha256).hexdigest()


@dataclass(frozen=True)
class Envelope:
    kind: str
    job: str
    seq: int
    type: str
    sender: str
    ts: int  # milliseconds since the epoch; informational only (ordering is by seq)
    body: Mapping[str, Any] = field(default_factory=dict)
    v: int = VERSION
    sig: str = ""

    def unsigned(self) -> dict[str, Any]:
        return {
            "v": self.v,
            "kind": self.kind,
            "job": self.job,
            "seq": self.seq,
            "type": self.type,
            "sender": self.sender,
            "ts": self.ts,
            "body": dict(self.body),
        }

    def signed(self, key: str) -> Envelope:
        return replace(self, sig=sign(key, canonical(self.unsigned())))

    def verify(self, key: str) -> bool:
        if not key or not self.sig or not self.sig.isascii():
            return False  # (compare_digest raises TypeError on non-ASCII text: found by tests/fuzz)
        try:
            expected = sign(key, canonical(self.unsigned()))
        except DecodeError:  # content no sender could have signed
            return False
        return hmac.compare_digest(self.sig, expected)

    def encode(self) -> bytes:
        return canonical({**self.unsigned(), "sig": self.sig})

    def as_dict(self) -> dict[str, Any]:
        return {**self.unsigned(), "sig": self.sig}

    @classmethod
    def decode(cls, data: bytes | str, *, max_bytes: int = MAX_EVENT_BYTES) -> Envelope:
        """Parse and shape-check a message; raise DecodeError(reason=...) on anything else."""
        raw = data.encode("utf-8") if isinstance(data, str) else bytes(data)
        if len(raw) > max_bytes:
            raise DecodeError(f"message of {len(raw)} bytes exceeds {max_bytes}", reason=Rejected.OVERSIZE)
        try:
            obj = json.loads(raw.decode("utf-8"), parse_float=_no_float, parse_constant=_no_float)
        except DecodeError:
            raise
        except (UnicodeDecodeError, ValueError, RecursionError) as e:
            raise DecodeError(f"not JSON: {type(e).__name__}", reason=Rejected.NOT_JSON) from e
        return cls.from_obj(obj)

    @classmethod
    def from_obj(cls, obj: object) -> Envelope:
        if not isinstance(obj, dict):
            raise DecodeError("envelope is not a JSON object", reason=Rejected.BAD_SHAPE)
        if type(obj.get("v")) is not int or obj["v"] != VERSION:  # `true == 1` in Python: insist on the integer
            raise DecodeError(
                f"unknown protocol version {obj.get('v')!r} (this mam speaks {VERSION})",
                reason=Rejected.UNKNOWN_VERSION,
            )
        extra = set(obj) - _FIELDS
        if extra:
            raise DecodeError(f"unknown envelope fields {sorted(extra)[:5]}", reason=Rejected.BAD_SHAPE)
        expect = {"kind": str, "job": str, "seq": int, "type": str, "sender": str, "ts": int, "body": dict, "sig": str}
        for name, typ in expect.items():
            value = obj.get(name)
            if not isinstance(value, typ) or isinstance(value, bool):
                raise DecodeError(f"field {name!r} missing or not a {typ.__name__}", reason=Rejected.BAD_SHAPE)
        if obj["kind"] not in KINDS:
            raise DecodeError(f"unknown kind {obj['kind']!r}", reason=Rejected.BAD_SHAPE)
        if not 0 <= obj["seq"] < MAX_INT or not 0 <= obj["ts"] < MAX_INT or not obj["job"] or len(obj["job"]) > 128:
            raise DecodeError("seq, ts or job out of range", reason=Rejected.BAD_SHAPE)
        check_tree(obj)
        return cls(
            kind=obj["kind"],
            job=obj["job"],
            seq=obj["seq"],
            type=obj["type"],
            sender=obj["sender"],
            ts=obj["ts"],
            body=obj["body"],
            v=obj["v"],
            sig=obj["sig"],
        )


def epoch_of(env: Envelope) -> int:
    """The fencing epoch `env` carries in its body; an absent one reads as 0 (a peer from before epochs).
    Raises DecodeError (bad_shape) when it is not a whole number from 0 up."""
    value = env.body.get(EPOCH, 0)
    if type(value) is not int or value < 0:
        raise DecodeError(f"body.epoch {str(value)[:40]!r} is not a whole number from 0 up", reason=Rejected.BAD_SHAPE)
    return value


def _no_float(text: str) -> Any:
    raise DecodeError(f"floating-point number {text[:20]!r} in a signed envelope", reason=Rejected.BAD_SHAPE)
