"""mam.util.wakepipe: a wake from another thread ends a wait, pending wakes are taken at once, a wait with none
times out, and a wake after close does nothing."""

from __future__ import annotations

import threading

from mam.util.wakepipe import WakePipe


def test_a_wake_from_another_thread_ends_the_wait_and_all_pending_wakes_are_taken() -> None:
    pipe = WakePipe()
    try:
        threading.Thread(target=pipe.wake).start()
        assert pipe.wait(30) is True
        for _ in range(100_000):  # more than the pipe holds: the rest are dropped, one wait takes them all
            pipe.wake()
        assert pipe.wait(0) is True
        assert pipe.wait(0.01) is False
    finally:
        pipe.close()


def test_a_wake_after_close_does_nothing_and_close_twice_is_fine() -> None:
    pipe = WakePipe()
    pipe.close()
    pipe.wake()
    pipe.close()
