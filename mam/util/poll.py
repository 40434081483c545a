"""Waiting by polling with a deadline (never a bare sleep-and-hope)."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TypeVar

T = TypeVar("T")

CHECK_SHARE = 2.0  # the pause after a look, at least this many times the look's own time


class Timeout(Exception):
    """Raised by `wait_for` when the condition did not hold before the deadline."""


def wait_for(
    check: Callable[[], T],
    *,
    timeout: float,
    interval: float = 0.05,
    message: str | Callable[[], str] = "condition not met",
) -> T:
    """Call `check` until it returns a truthy value or `timeout` seconds pass; return that value.

    Between two looks it pauses `interval`, or CHECK_SHARE times as long as the look took if that is longer: a
    costly look (one that runs a process) then takes at most a third of the wait's time instead of all of it."""
    deadline = time.monotonic() + timeout
    while True:
        began = time.monotonic()
        value = check()
        if value:
            return value
        now = time.monotonic()
        remaining = deadline - now
        if remaining <= 0:
            text = message() if callable(message) else message
            raise Timeout(f"{text} (after {timeout:.1f}s)")
        time.sleep(min(max(interval, CHECK_SHARE * (now - began)), remaining))
