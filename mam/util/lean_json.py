"""JSON for the lean entry points (mam.fast_event, the heartbeater's first look), from the C
accelerators in `_json` that the `json` package itself uses, without importing `json` (which
imports `re`, a few milliseconds of each `mam event`).

`loads` gives what `json.loads` gives for every document (tests/unit/test_lean_json.py holds them
equal), `canonical` what `json.dumps(obj, sort_keys=True, separators=(",", ":"),
ensure_ascii=False, allow_nan=False)` gives: the envelope's canonical form (mam.bus.envelope).
Where `_json` is missing (another interpreter), both fall back to the `json` package.
"""

from __future__ import annotations

from types import SimpleNamespace

TYPE_CHECKING = False  # `typing` imports `re`
if TYPE_CHECKING:
    from typing import Any

try:
    import _json
except ImportError:  # pragma: no cover - CPython always has it
    _json = None  # type: ignore[assignment]

_WS = " \t\n\r"
_CONSTANTS = {"-Infinity": float("-inf"), "Infinity": float("inf"), "NaN": float("nan")}


def _context() -> SimpleNamespace:
    """The attributes `_json.make_scanner` reads from a json.JSONDecoder."""
    return SimpleNamespace(
        strict=True,
        object_hook=None,
        object_pairs_hook=None,
        parse_float=float,
        parse_int=int,
        parse_constant=_CONSTANTS.__getitem__,
        memo={},
    )


class DecodeError(ValueError):
    """Not a JSON document (json.JSONDecodeError is a ValueError too)."""


def loads(text: str) -> Any:
    if _json is None:  # pragma: no cover
        import json

        return json.loads(text)
    ctx = _context()
    scan = _json.make_scanner(ctx)  # type: ignore[arg-type]
    start = len(text) - len(text.lstrip(_WS))
    try:
        obj, end = scan(text, start)
    except StopIteration as e:
        raise DecodeError(f"expecting a value at {e.value}") from None
    finally:
        ctx.memo.clear()
    if text[end:].strip(_WS):
        raise DecodeError(f"extra data at {end}")
    return obj


def _fail(obj: Any) -> Any:
    raise TypeError(f"Object of type {type(obj).__name__} is not JSON serializable")


def canonical(obj: Any) -> str:
    if _json is None or getattr(_json, "make_encoder", None) is None:  # pragma: no cover
        import json

        return json.dumps(obj, sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False)
    encode = _json.make_encoder({}, _fail, _json.encode_basestring, None, ":", ",", True, False, False)
    return "".join(encode(obj, 0))
