"""The node's socket and its frames: a 4-byte big-endian length and a JSON object.

What the frames say is the node protocol (mam.protocol, docs/node-protocol.md): a request from the
client, then the node's frames until its final one. Both ends are this user's processes: the node
checks the peer's uid, the client the socket's owner and mode. Lean on purpose: the client runs at the
start of every `mam event`, so the JSON is written
and read with the C functions of the standard `json` package (`_json`) directly: importing `json`
itself (and `re`, `enum` with it) cost each client about 8 ms of CPU. Both ends use these two
functions; tests/unit/test_node_wire.py holds them to `json.dumps`/`json.loads`.
"""

from __future__ import annotations

import _json
import math

TYPE_CHECKING = False  # not `typing`'s: importing it costs the client ~5 ms of its start
if TYPE_CHECKING:
    from typing import Any

SOCKET, LOCK, LOG, STATUS = "node.sock", "node.lock", "node.log", "node.json"
HEADER = 4
MAX_FRAME = 64 << 20  # a brief is at most a few MB (mam.jobs.brief); an environment a few hundred KB


def frame(obj: dict[str, Any]) -> bytes:
    data = dumps(obj).encode("ascii")
    return len(data).to_bytes(HEADER, "big") + data


def dumps(obj: Any) -> str:
    """`json.dumps(obj, separators=(",", ":"))` for str, int, finite float, bool, None, list, tuple and
    dict with str keys; TypeError/ValueError for anything else."""
    if isinstance(obj, str):
        return str(_json.encode_basestring_ascii(obj))
    if obj is None:
        return "null"
    if obj is True:
        return "true"
    if obj is False:
        return "false"
    if isinstance(obj, int):
        return int.__repr__(obj)
    if isinstance(obj, float):
        if not math.isfinite(obj):
            raise ValueError(f"{obj!r} is not JSON")
        return float.__repr__(obj)
    if isinstance(obj, dict):
        for key in obj:
            if not isinstance(key, str):
                raise TypeError(f"a key of type {type(key).__name__}")
        return "{" + ",".join(f"{dumps(k)}:{dumps(v)}" for k, v in obj.items()) + "}"
    if isinstance(obj, (list, tuple)):
        return "[" + ",".join(dumps(v) for v in obj) + "]"
    raise TypeError(f"a {type(obj).__name__} is not JSON")


_C1 = {c: f"\\u{c:04x}" for c in range(0x7F, 0xA0)}  # DEL and C1: json writes them raw, a terminal obeys C1


def pretty(obj: Any, indent: str = "") -> str:
    """`mam.util.text.json_text(obj, indent=2)` (sorted keys, non-ASCII text as is, every control character an
    escape) for the JSON values the node answers with, without importing `json` or `re`: what `--json` prints."""
    if isinstance(obj, str):
        return str(_json.encode_basestring(obj)).translate(_C1)
    if isinstance(obj, dict):
        if not obj:
            return "{}"
        inner = indent + "  "
        items = [f"{inner}{pretty(str(k))}: {pretty(obj[k], inner)}" for k in sorted(obj)]
        return "{\n" + ",\n".join(items) + "\n" + indent + "}"
    if isinstance(obj, (list, tuple)):
        if not obj:
            return "[]"
        inner = indent + "  "
        return "[\n" + ",\n".join(inner + pretty(v, inner) for v in obj) + "\n" + indent + "]"
    try:
        return dumps(obj)
    except TypeError:
        return pretty(str(obj))  # as json_text's default=str: an answer made in this process may hold one


def _constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")  # NaN, Infinity, -Infinity: json.loads takes them, mam never sends them


class _Rules:
    """What the C scanner asks of a JSONDecoder (json.scanner.c_make_scanner): strict, plain dicts."""

    strict = True
    object_hook = None
    object_pairs_hook = None
    parse_float = float
    parse_int = int
    parse_constant = staticmethod(_constant)


_scan = _json.make_scanner(_Rules())  # type: ignore[arg-type]  # typeshed: a make_scanner as context


def loads(data: bytes) -> Any:
    """`json.loads` of a UTF-8 document (no NaN or Infinity); ValueError when it is not one."""
    text = data.decode("utf-8")
    start = len(text) - len(text.lstrip(" \t\n\r"))
    try:
        obj, end = _scan(text, start)
    except StopIteration:
        raise ValueError("not a JSON document") from None
    except RecursionError:
        raise ValueError("a JSON document nested too deep") from None
    if text[end:].strip(" \t\n\r"):
        raise ValueError("text after the JSON document")
    return obj


class Frames:
    """Cuts a byte stream into the objects it carries; ValueError for a frame too big or not an object.
    Linear in what it is fed: a large frame arriving in many pieces is copied once, not once per piece."""

    def __init__(self) -> None:
        self.buf = bytearray()

    def feed(self, data: bytes) -> list[dict[str, Any]]:
        self.buf += data
        out = []
        at = 0
        while len(self.buf) - at >= HEADER:
            size = int.from_bytes(self.buf[at : at + HEADER], "big")
            if size > MAX_FRAME:
                raise ValueError(f"a frame of {size} bytes")
            if len(self.buf) - at < HEADER + size:
                break
            obj = loads(bytes(self.buf[at + HEADER : at + HEADER + size]))
            at += HEADER + size
            if not isinstance(obj, dict):
                raise ValueError("a frame that is not an object")
            out.append(obj)
        if at:
            del self.buf[:at]
        return out
