"""mam.util.interrupts.noted(): Ctrl-C notes itself instead of raising wherever the loop is (mam tail, board watch)."""

from __future__ import annotations

import signal
import threading

import pytest

from mam.util import interrupts


@pytest.fixture
def default_sigint():  # type: ignore[no-untyped-def]
    """SIGINT's handler as the test found it, put back after (a suite started in the background ignores it)."""
    old = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, old)


def test_inside_sigint_sets_the_note_and_calls_then_and_after_it_raises_again(default_sigint) -> None:  # type: ignore[no-untyped-def]
    assert threading.current_thread() is threading.main_thread()
    called: list[bool] = []
    with interrupts.noted(lambda: called.append(True)) as ctrl_c:
        assert not ctrl_c.interrupted
        signal.raise_signal(signal.SIGINT)  # no KeyboardInterrupt here
        assert ctrl_c.interrupted and called == [True]
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler
    with pytest.raises(KeyboardInterrupt):
        signal.raise_signal(signal.SIGINT)


def test_an_ignored_sigint_stays_ignored(default_sigint) -> None:  # type: ignore[no-untyped-def]
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    with interrupts.noted() as ctrl_c:
        assert signal.getsignal(signal.SIGINT) == signal.SIG_IGN
        signal.raise_signal(signal.SIGINT)
    assert not ctrl_c.interrupted
