"""Keeping what an attacker sends from filling the disk: every string from the wire is clipped
before it reaches a log line, and rejections beyond a rate are counted, then summarised in one
line instead of written one by one.
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

FIELD_CHARS = 240  # the most of any one string a log line keeps
REJECTIONS_PER_S = 50  # rejection lines a job writes per second before it starts counting instead


def clip(value: Any, limit: int = FIELD_CHARS) -> Any:
    """`value` with every string in it cut to `limit` characters (a marker says how long it was)."""
    if isinstance(value, str):
        return value if len(value) <= limit else f"{value[:limit]}...[{len(value)} chars]"
    if isinstance(value, bytes):
        return clip(value.decode("utf-8", "replace"), limit)
    if isinstance(value, Mapping):
        return {clip(str(k), 64): clip(v, limit) for k, v in list(value.items())[:32]}
    if isinstance(value, (list, tuple)):
        return [clip(v, limit) for v in value[:32]]
    return value


def clip_fields(fields: Mapping[str, Any], limit: int = FIELD_CHARS) -> dict[str, Any]:
    return {k: clip(v, limit) for k, v in fields.items()}


@dataclass
class RejectionLimiter:
    """Lets `rate` rejections a second through to the log; counts the rest and hands one summary
    line (`rejections_suppressed`: how many, their reasons, the window) to `write` when the
    window ends (at the next rejection or `flush`)."""

    write: Callable[[str, dict[str, Any]], None]
    rate: int = REJECTIONS_PER_S
    clock: Callable[[], float] = time.monotonic
    _window: float = field(default=0.0, init=False)
    _written: int = field(default=0, init=False)
    _dropped: Counter[str] = field(default_factory=Counter, init=False)

    def allow(self, reason: str) -> bool:
        """True if this rejection may be written now; False if it was counted instead."""
        now = self.clock()
        if now - self._window >= 1.0:
            self.flush()
            self._window, self._written = now, 0
        if self._written < self.rate:
            self._written += 1
            return True
        self._dropped[reason[:64]] += 1
        return False

    def tick(self) -> None:
        """Write the summary if the window it counts has ended."""
        if self._dropped and self.clock() - self._window >= 1.0:
            self.flush()

    def flush(self) -> None:
        if self._dropped:
            dropped, self._dropped = self._dropped, Counter()
            self.write(
                "rejections_suppressed",
                {"count": sum(dropped.values()), "reasons": dict(dropped), "rate_per_s": self.rate},
            )
