"""`fit`: an event's report is cut until the encoded, signed envelope fits the wire (issue 12, item 6)."""

from __future__ import annotations

import pytest

from mam.bus.envelope import MAX_EVENT_BYTES, Envelope
from mam.errors import EventTooLarge
from mam.jobs.emit import CUT_MARKER, fit


def test_fit_keeps_the_longest_start_that_fits_and_refuses_what_cannot_fit() -> None:
    env = Envelope("event", "j", 7, "completed", "agent", 1, {"message": "m", "report": "\x1b" * 20_000})
    cut, was_cut = fit(env, "report")
    assert was_cut and len(cut.signed("k").encode()) <= MAX_EVENT_BYTES
    longer = Envelope(
        "event",
        "j",
        7,
        "completed",
        "agent",
        1,
        {**cut.body, "report": "\x1b" * (len(cut.body["report"]) - len(CUT_MARKER) + 1) + CUT_MARKER},
    )
    assert len(longer.signed("k").encode()) > MAX_EVENT_BYTES  # one character more would not fit
    small = Envelope("event", "j", 7, "completed", "agent", 1, {"report": "short"})
    assert fit(small, "report") == (small, False)
    with pytest.raises(EventTooLarge, match="the limit is 65536"):
        fit(Envelope("event", "j", 7, "progress", "agent", 1, {"message": "\x1b" * 20_000}), None)
    with pytest.raises(EventTooLarge, match="even without its report"):
        fit(Envelope("event", "j", 7, "completed", "agent", 1, {"message": "\x1b" * 11_000, "report": "r"}), "report")
