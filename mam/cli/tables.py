"""Plain-text tables for people: aligned columns, human ages, local times, audit lines as columns."""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping, Sequence
from datetime import datetime
from typing import Any

_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f]")


def table(header: Sequence[str], rows: Iterable[Sequence[object]]) -> str:
    """Columns padded to their widest cell; the last column is not padded."""
    lines = [tuple(header), *(tuple(_CONTROL.sub(" ", str(v)) for v in row) for row in rows)]
    widths = [max(len(line[i]) for line in lines) for i in range(len(header) - 1)]
    return "\n".join("  ".join([*(v.ljust(w) for v, w in zip(line, widths)), line[-1]]).rstrip() for line in lines)


def age(seconds: float) -> str:
    """`12s`, `5m`, `3h`, `2d`: how long ago, rounded down."""
    s = max(0, int(seconds))
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
        if s >= size:
            return f"{s // size}{unit}"
    return f"{s}s"


def local_time(ms: object) -> str:
    """An epoch time in milliseconds as a local ISO 8601 time with its offset ("-" if not a number)."""
    if not isinstance(ms, int | float) or isinstance(ms, bool):
        return "-"
    return datetime.fromtimestamp(ms / 1000).astimezone().isoformat(timespec="milliseconds")


def _fields(data: Mapping[str, Any]) -> str:
    out = []
    for key in sorted(data):
        value = data[key]
        if value is None or value == "" or value == {}:
            continue
        text = value if isinstance(value, str) else json.dumps(value, sort_keys=True, ensure_ascii=False)
        out.append(f"{key}={text}")
    return " ".join(out)


def log_rows(lines: Iterable[Mapping[str, Any]]) -> list[tuple[str, str, str, str, str]]:
    """A job's audit log as (time, kind, what, state, fields) rows."""
    rows = []
    for line in lines:
        kind = str(line.get("kind", "?"))
        rest = {k: v for k, v in line.items() if k not in ("ts_ms", "kind", "pid", "n")}
        what, state = "-", "-"
        if kind == "input" and isinstance(rest.get("input"), Mapping):
            inp = dict(rest.pop("input"))
            inp.pop("at", None)
            what = str(inp.pop("input", "?"))
            if "type" in inp:
                what += f" {inp.pop('type')}"
            if "sender" in inp:
                what += f" from {inp.pop('sender')}"
            if "seq" in inp:
                what += f" #{inp.pop('seq')}"
            body = inp.pop("body", None)
            state = str(rest.pop("state", "-"))
            reason = rest.pop("reason", "")
            if reason and reason != state:
                state += f" ({reason})"
            rest.pop("exit_code", None)
            rest = {**inp, **(body if isinstance(body, Mapping) else {}), **rest}
        elif kind == "created" and isinstance(rest.get("job"), Mapping):
            job = rest.pop("job")
            meta = rest.pop("meta", {}) or {}
            state = str(job.get("state", "-"))
            rest = {
                "session": job.get("session"),
                "target": meta.get("target"),
                "brief_bytes": meta.get("brief_bytes"),
                "parent_job": meta.get("parent_job"),
                **{k: v for k, v in rest.items() if k != "owner"},
            }
        rows.append((local_time(line.get("ts_ms")), kind, what, state, _fields(rest)))
    return rows
