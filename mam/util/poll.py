"""Waiting by polling with a deadline (never a bare sleep-and-hope)."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TypeVar

T = TypeVar("T")


class Timeout(Exception):
    """Raised by `wait_for` when the condition did not hold before the deadline."""


def wait_for(
    check: Callable[[], T],
    *,
    timeout: float,
    interval: float = 0.05,
    message: str | Callable[[], str] = "condition not met",
) -> T:
    """Call `check` until it returns a truthy value or `timeout` seconds pass; return that value."""
    deadline = time.monotonic() + timeout
    while True:
        value = check()
        if value:
            return value
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            text = message() if callable(message) else message
            raise Timeout(f"{text} (after {timeout:.1f}s)")
        time.sleep(min(interval, remaining))
