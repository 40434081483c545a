"""wait_ready holds out for an adapter's ready_settle_s: gemini 0.61.0 draws a ready-looking
input box in a folder not yet trusted, then its trust dialog over it (both frames captured from
the real CLI), and mam must see the dialog rather than paste into the box."""

from __future__ import annotations

import time
import types
from pathlib import Path

import pytest

from mam.agents import get_adapter
from mam.agents.ready import wait_ready
from mam.errors import AgentDialog

SCREENS = Path(__file__).parent / "screens" / "gemini-0.61.0"


class _Frames:
    """A pane that shows `first` for `for_s` seconds (from the first capture), then `then`."""

    def __init__(self, first: str, then: str, for_s: float) -> None:
        self.first, self.then, self.for_s = first, then, for_s
        self.started: float | None = None

    def pane(self, pane_id: str) -> object:
        return types.SimpleNamespace(dead=False, pid=None)

    def capture(self, pane_id: str, lines: int = 0) -> str:
        if self.started is None:
            self.started = time.monotonic()
        return self.first if time.monotonic() - self.started < self.for_s else self.then


def test_gemini_waits_out_the_frame_drawn_before_its_trust_dialog() -> None:
    early = (SCREENS / "before-trust-dialog.txt").read_text(encoding="utf-8")
    dialog = (SCREENS / "trust-dialog.txt").read_text(encoding="utf-8")
    adapter = get_adapter("gemini")
    assert adapter.is_ready(early) and adapter.ready_settle_s > 0.3
    with pytest.raises(AgentDialog) as caught:
        wait_ready(_Frames(early, dialog, 0.3), "%1", adapter, timeout=10)
    assert caught.value.kind == "trust"


def test_a_ready_screen_that_holds_is_ready() -> None:
    ready = (SCREENS / "ready.txt").read_text(encoding="utf-8")
    assert wait_ready(_Frames(ready, ready, 0), "%1", get_adapter("gemini"), timeout=10)
