"""mam/util/poll.py wait_for's pacing, on a clock of the test's own: a cheap look is repeated every `interval`; a
costly one (a process a test runs) is followed by a pause twice its length, so looking takes at most a third
of the wait."""

from __future__ import annotations

import pytest

from mam.util import poll


class Clock:
    def __init__(self) -> None:
        self.now = 100.0
        self.pauses: list[float] = []

    def sleep(self, seconds: float) -> None:
        self.pauses.append(round(seconds, 6))
        self.now += seconds


@pytest.fixture
def clock(monkeypatch: pytest.MonkeyPatch) -> Clock:
    c = Clock()
    monkeypatch.setattr(poll.time, "monotonic", lambda: c.now)
    monkeypatch.setattr(poll.time, "sleep", c.sleep)
    return c


def looks(clock: Clock, cost: float, succeed_at: int) -> list[int]:
    seen: list[int] = []

    def check() -> bool:
        clock.now += cost
        seen.append(len(seen))
        return len(seen) == succeed_at

    poll.wait_for(check, timeout=60, interval=0.05)
    return seen


def test_a_cheap_look_is_repeated_every_interval(clock: Clock) -> None:
    assert len(looks(clock, 0.001, 5)) == 5
    assert clock.pauses == [0.05] * 4


def test_a_costly_look_is_followed_by_twice_its_length(clock: Clock) -> None:
    assert len(looks(clock, 0.15, 4)) == 4
    assert clock.pauses == [0.3] * 3


def test_the_last_pause_stops_at_the_deadline(clock: Clock) -> None:
    def check() -> bool:
        clock.now += 0.4
        return False

    with pytest.raises(poll.Timeout):
        poll.wait_for(check, timeout=1.0, interval=0.05)
    assert clock.pauses == [0.6]  # after the second look (0.4 + 0.6 + 0.4 = 1.4 s) the deadline has passed
