"""mam.jobs.delivery.before_enter: for a CLI that takes an Enter right after other input as a newline (gemini
0.61.0: within 30 ms, its FAST_RETURN_TIMEOUT, where the terminal has no kitty keyboard protocol, as in tmux),
the Enter that submits a paste waits until the paste shows in the input box, then the adapter's gap; any other
CLI's Enter follows at once. Without the wait, every brief pasted into a real gemini sat unsubmitted until the
nudge (10 s later for a job with a 120 s start deadline)."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from mam.agents import get_adapter
from mam.jobs import delivery
from mam.jobs.delivery import before_enter

SCREENS = Path(__file__).resolve().parents[1] / "agents" / "screens" / "gemini-0.61.0"
FAST_RETURN_S = 0.030  # gemini 0.61.0's FAST_RETURN_TIMEOUT


class Pane:
    """A pane whose input box shows the paste from the `shows_after`-th capture on; the time of each capture."""

    def __init__(self, before: str, after: str, shows_after: int) -> None:
        self.before, self.after, self.shows_after = before, after, shows_after
        self.captures: list[float] = []

    def capture(self, pane_id: str, lines: int = 200) -> str:
        self.captures.append(time.monotonic())
        return self.after if len(self.captures) >= self.shows_after else self.before


def pasted(screen: str) -> bool:
    return get_adapter("gemini").input_pending(screen, "no-such-nonce")


def test_gemini_waits_for_the_paste_to_show_then_more_than_its_fast_return_window() -> None:
    gemini = get_adapter("gemini")
    ready, unsubmitted = (SCREENS / "ready.txt").read_text(), (SCREENS / "brief-unsubmitted.txt").read_text()
    assert not pasted(ready) and pasted(unsubmitted)  # what the wait looks for, on gemini's own screens
    assert gemini.enter_gap_s > FAST_RETURN_S
    pane = Pane(ready, unsubmitted, shows_after=3)
    screen = before_enter(pane, "%1", gemini, ready, pasted)  # type: ignore[arg-type]
    assert screen == unsubmitted
    shown_at, looked_at = pane.captures[2], pane.captures[-1]
    assert len(pane.captures) == 4 and looked_at - shown_at >= gemini.enter_gap_s


def test_a_paste_that_never_shows_is_waited_for_a_bounded_time(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(delivery, "PASTE_SHOWS_S", 0.2)
    ready = (SCREENS / "ready.txt").read_text()
    pane = Pane(ready, ready, shows_after=1)
    began = time.monotonic()
    assert before_enter(pane, "%1", get_adapter("gemini"), ready, pasted) == ready  # type: ignore[arg-type]
    assert time.monotonic() - began >= 0.2 and len(pane.captures) >= 2


@pytest.mark.parametrize("agent", ["claude", "codex", "opencode", "hermes", "grok", "demo"])
def test_a_cli_without_a_gap_gets_its_enter_at_once_on_the_screen_it_was_given(agent: str) -> None:
    pane = Pane("", "", shows_after=1)
    assert get_adapter(agent).enter_gap_s == 0
    assert before_enter(pane, "%1", get_adapter(agent), "the screen", pasted) == "the screen"  # type: ignore[arg-type]
    assert pane.captures == []
