"""Signals that end a command without cutting a step in half.

`raising()`: while inside, SIGINT, SIGTERM and SIGHUP (each unless ignored: nohup, a background job)
raise `Interrupted(signum)` in the main thread, a KeyboardInterrupt, so what treats Ctrl-C treats
them all alike (a job's attempt leaves its job open: mam.jobs.attempt). `held()`: a section no such
signal cuts (the claim and the paste of a brief, one commit of the journal); one that arrives inside
is raised when the section ends. Outside `raising()`, SIGINT raises Python's own KeyboardInterrupt.
`noted()`: for a loop that waits in a lock (a queue's `get`, an event's `wait`), Ctrl-C only notes itself and
the loop ends at its next look: a KeyboardInterrupt raised inside `threading.Condition.wait` can leave its
lock released twice (RuntimeError, exit 1 instead of 130: seen with `mam tail` in CI).

Signal handlers run in the main thread only, so `held()` in another thread holds nothing back.
"""

from __future__ import annotations

import signal
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from types import FrameType

SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)


class Interrupted(KeyboardInterrupt):
    """One of SIGNALS arrived; the process ends with 128 + its number, as a shell reports it."""

    def __init__(self, signum: int) -> None:
        super().__init__(signum)
        self.signum = signum

    @property
    def exit_code(self) -> int:
        return 128 + self.signum


_state = {"depth": 0, "pending": 0}


def signum_of(error: KeyboardInterrupt) -> int:
    """The signal behind an interrupt (Python's own KeyboardInterrupt is SIGINT's)."""
    return error.signum if isinstance(error, Interrupted) else int(signal.SIGINT)


def _handler(signum: int, _frame: FrameType | None) -> None:
    if _state["depth"]:
        _state["pending"] = _state["pending"] or signum
        return
    raise Interrupted(signum)


@contextmanager
def raising() -> Iterator[None]:
    """While inside, SIGINT/SIGTERM/SIGHUP raise Interrupted (main thread only; ignored ones stay ignored)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    before = {}
    for signum in SIGNALS:
        current = signal.getsignal(signum)
        if current == signal.SIG_IGN:
            continue
        before[signum] = current
        signal.signal(signum, _handler)
    try:
        yield
    finally:
        for signum, handler in before.items():
            signal.signal(signum, handler)


@contextmanager
def held() -> Iterator[None]:
    """A section no signal of `raising()` cuts: one that arrives inside is raised when it ends."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    _state["depth"] += 1
    try:
        yield
    finally:
        _state["depth"] -= 1
        if not _state["depth"] and _state["pending"]:
            signum, _state["pending"] = _state["pending"], 0
            raise Interrupted(signum)


@contextmanager
def ignored() -> Iterator[None]:
    """While inside, SIGINT/SIGTERM/SIGHUP are ignored (main thread only): for the last words of a
    command already interrupted (handing its job over), which a second Ctrl-C or a hang-up must not cut."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    before = {signum: signal.getsignal(signum) for signum in SIGNALS}
    for signum in SIGNALS:
        signal.signal(signum, signal.SIG_IGN)
    try:
        yield
    finally:
        for signum, handler in before.items():
            signal.signal(signum, handler)


class Noted:
    """What `noted()` yields: `.interrupted` once Ctrl-C came."""

    def __init__(self) -> None:
        self.interrupted = False


@contextmanager
def noted(then: Callable[[], None] | None = None) -> Iterator[Noted]:
    """While inside, SIGINT sets `.interrupted` and calls `then` (lock-free: it runs in the main thread, between
    any two steps of it) instead of raising; main thread only, an ignored SIGINT stays ignored."""
    note = Noted()
    if threading.current_thread() is not threading.main_thread() or signal.getsignal(signal.SIGINT) == signal.SIG_IGN:
        yield note
        return

    def handler(_signum: int, _frame: FrameType | None) -> None:
        note.interrupted = True
        if then is not None:
            then()

    before = signal.signal(signal.SIGINT, handler)
    try:
        yield note
    finally:
        signal.signal(signal.SIGINT, before)
