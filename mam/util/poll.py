"""Waiting by polling with a deadline (never a bare sleep-and-hope)."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TypeVar

T = TypeVar("T")

CHECK_SHARE = 2.0  # the pause after a look, at least this many times the look's own time
BACKOFF_MOST_S = 0.5  # a pause that grows with the wait (`backoff`) grows no longer than this


class Timeout(Exception):
    """Raised by `wait_for` when the condition did not hold before the deadline."""


def wait_for(
    check: Callable[[], T],
    *,
    timeout: float,
    interval: float = 0.05,
    backoff: float = 0.0,
    message: str | Callable[[], str] = "condition not met",
) -> T:
    """Call `check` until it returns a truthy value or `timeout` seconds pass; return that value.

    Between two looks it pauses `interval`, or CHECK_SHARE times as long as the look took if that is longer: a
    costly look (one that runs a process) then takes at most a third of the wait's time instead of all of it.
    With `backoff`, the pause is also at least that share of the time waited so far, up to BACKOFF_MOST_S: what
    takes long (a program's start) is looked at less often the longer it takes, and seen at most that share late."""
    start = time.monotonic()
    deadline = start + timeout
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
        grown = min(backoff * (now - start), BACKOFF_MOST_S)
        time.sleep(min(max(interval, CHECK_SHARE * (now - began), grown), remaining))
