"""A logging filter that lets one line of a kind through per interval and counts the rest.

For what anyone may cause many times a second (a refused request, a malformed header): the log gets one
short line a minute and the number of the others, never one line (or one traceback) each.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable

EVERY_S = 60.0


class Throttle(logging.Filter):
    """Per message template (its logger and format string): the first record of each `every_s` passes,
    with " (and N more like it since the last such line)" added when some were held back; the rest are counted."""

    def __init__(self, every_s: float = EVERY_S, clock: Callable[[], float] = time.monotonic) -> None:
        super().__init__()
        self.every_s, self.clock = every_s, clock
        self._last: dict[tuple[str, str], float] = {}
        self._held: dict[tuple[str, str], int] = {}
        self._lock = threading.Lock()

    def filter(self, record: logging.LogRecord) -> bool:
        kind = (record.name, str(record.msg))
        now = self.clock()
        with self._lock:
            if now - self._last.get(kind, -self.every_s) < self.every_s:
                self._held[kind] = self._held.get(kind, 0) + 1
                return False
            self._last[kind] = now
            held = self._held.pop(kind, 0)
            if len(self._last) > 256:  # templates are the code's own: few, but never unbounded
                self._last = {kind: now}
        if held:
            record.msg = f"{record.msg} (and {held} more like it since the last such line)"
        record.exc_info = record.exc_text = None  # a line, never a traceback
        return True
