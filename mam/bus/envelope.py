"""The signed envelope every mam message travels in, its canonical JSON and its HMAC.

Canonical form (what is signed): the envelope without `sig`, as JSON with keys sorted,
no whitespace, non-ASCII as raw UTF-8, and no floating-point numbers anywhere (times are
integer milliseconds), so any language can reproduce the bytes. See MESSAGING.md.
"""

from __future__ import annotations

import hashlib
import hmac
import json
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from mam.errors import DecodeError

VERSION = 1
MAX_EVENT_BYTES = 64 * 1024
MAX_DISPATCH_BYTES = 1024 * 1024
KINDS = ("event", "state", "dispatch", "presence")
_FIELDS = {"v", "kind", "job", "seq", "type", "sender", "ts", "body", "sig"}


def canonical(obj: Mapping[str, Any]) -> bytes:
    return json.dumps(obj, sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False).encode("utf-8")


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
        return {"v": self.v, "kind": self.kind, "job": self.job, "seq": self.seq, "type": self.type,
                "sender": self.sender, "ts": self.ts, "body": dict(self.body)}

    def signed(self, key: str) -> Envelope:
        return replace(self, sig=sign(key, canonical(self.unsigned())))

    def verify(self, key: str) -> bool:
        if not key or not self.sig:
            return False
        return hmac.compare_digest(self.sig, sign(key, canonical(self.unsigned())))

    def encode(self) -> bytes:
        return canonical({**self.unsigned(), "sig": self.sig})

    def as_dict(self) -> dict[str, Any]:
        return {**self.unsigned(), "sig": self.sig}

    @classmethod
    def decode(cls, data: bytes | str, *, max_bytes: int = MAX_EVENT_BYTES) -> Envelope:
        """Parse and shape-check a message; raise DecodeError(reason=...) on anything else."""
        raw = data.encode("utf-8") if isinstance(data, str) else bytes(data)
        if len(raw) > max_bytes:
            raise DecodeError(f"message of {len(raw)} bytes exceeds {max_bytes}", reason="oversize")
        try:
            obj = json.loads(raw.decode("utf-8"), parse_float=_no_float, parse_constant=_no_float)
        except DecodeError:
            raise
        except (UnicodeDecodeError, ValueError, RecursionError) as e:
            raise DecodeError(f"not JSON: {type(e).__name__}", reason="not_json") from e
        return cls.from_obj(obj)

    @classmethod
    def from_obj(cls, obj: object) -> Envelope:
        if not isinstance(obj, dict):
            raise DecodeError("envelope is not a JSON object", reason="bad_shape")
        if obj.get("v") != VERSION:
            raise DecodeError(f"unknown protocol version {obj.get('v')!r} (this mam speaks {VERSION})", reason="unknown_version")
        extra = set(obj) - _FIELDS
        if extra:
            raise DecodeError(f"unknown envelope fields {sorted(extra)[:5]}", reason="bad_shape")
        expect = {"kind": str, "job": str, "seq": int, "type": str, "sender": str, "ts": int, "body": dict, "sig": str}
        for name, typ in expect.items():
            value = obj.get(name)
            if not isinstance(value, typ) or isinstance(value, bool):
                raise DecodeError(f"field {name!r} missing or not a {typ.__name__}", reason="bad_shape")
        if obj["kind"] not in KINDS:
            raise DecodeError(f"unknown kind {obj['kind']!r}", reason="bad_shape")
        if obj["seq"] < 0 or obj["ts"] < 0 or not obj["job"] or len(obj["job"]) > 128:
            raise DecodeError("seq, ts or job out of range", reason="bad_shape")
        return cls(kind=obj["kind"], job=obj["job"], seq=obj["seq"], type=obj["type"], sender=obj["sender"],
                   ts=obj["ts"], body=obj["body"], v=obj["v"], sig=obj["sig"])


def _no_float(text: str) -> Any:
    raise DecodeError(f"floating-point number {text[:20]!r} in a signed envelope", reason="bad_shape")
