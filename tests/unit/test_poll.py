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


def test_with_backoff_the_pause_grows_with_the_wait_up_to_its_cap(clock: Clock) -> None:
    """A program's start that takes 5 s (the look free): every 50 ms for the first half second, then a tenth of
    the time waited, never over BACKOFF_MOST_S; about a third of the looks a fixed 50 ms pause would take."""
    seen: list[float] = []
    start = clock.now

    def check() -> bool:
        seen.append(clock.now - start)
        return clock.now - start >= 5.0

    poll.wait_for(check, timeout=60, interval=0.05, backoff=0.1)
    assert clock.pauses[:10] == [0.05] * 10
    waited = seen[:-1]
    assert clock.pauses == pytest.approx([max(0.05, min(0.1 * w, poll.BACKOFF_MOST_S)) for w in waited], abs=1e-5)
    assert max(clock.pauses) <= poll.BACKOFF_MOST_S
    assert seen[-1] - 5.0 <= 0.1 * 5.0  # seen at most a tenth late
    assert len(seen) < 40  # 100 looks with a fixed 50 ms pause


def test_with_a_long_wait_the_pause_stays_at_its_cap(clock: Clock) -> None:
    def check() -> bool:
        return False

    with pytest.raises(poll.Timeout):
        poll.wait_for(check, timeout=30.0, interval=0.05, backoff=0.1)
    assert clock.pauses[-2] == poll.BACKOFF_MOST_S and max(clock.pauses) == poll.BACKOFF_MOST_S
