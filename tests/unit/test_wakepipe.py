"""mam.util.wakepipe: a wake from another thread ends a wait, pending wakes are taken at once, a wait with none
times out, and a wake after close does nothing."""

from __future__ import annotations

import os
import platform
import signal
import threading

import pytest

from mam.util.poll import wait_for
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


POLL_SYSCALLS = {"x86_64": ("7", "271"), "aarch64": ("73",)}  # poll, ppoll: /proc/<tid>/syscall's first field


def test_a_sigint_another_thread_took_wakes_the_main_threads_wait_into_its_keyboardinterrupt() -> None:
    """The kernel may hand a process's SIGINT to any of its threads; Python raises the KeyboardInterrupt in the
    main thread, but only once that thread runs again. Sent to another thread on purpose (pthread_kill) once the
    main thread sleeps in poll(2), it must still end the main thread's wait at once, not when something else
    wakes it (the helper wakes the pipe after 30 s only so that a failure does not hang: that fallback firing
    is the failure)."""
    if threading.current_thread() is not threading.main_thread():
        pytest.skip("signals reach the main thread only")
    polls = POLL_SYSCALLS.get(platform.machine())
    if polls is None or not os.path.exists(f"/proc/self/task/{threading.get_native_id()}/syscall"):
        pytest.skip("needs Linux's /proc/<tid>/syscall on x86_64 or aarch64")
    pipe = WakePipe()
    interrupted = threading.Event()
    fallback: list[bool] = []
    main = threading.get_native_id()

    def in_poll() -> bool:
        try:
            with open(f"/proc/self/task/{main}/syscall", encoding="ascii") as f:
                return f.read().split(" ", 1)[0] in polls
        except OSError:
            return False

    def other_thread() -> None:
        wait_for(in_poll, timeout=30, interval=0.01, message="the main thread never slept in poll")
        signal.pthread_kill(threading.get_ident(), signal.SIGINT)  # this thread takes it, not the main one
        if not interrupted.wait(30):
            fallback.append(True)
            pipe.wake()

    before = signal.signal(signal.SIGINT, signal.default_int_handler)
    fd_before = signal.set_wakeup_fd(-1)  # whatever an earlier test of this process left set
    signal.set_wakeup_fd(fd_before)
    helper = threading.Thread(target=other_thread, daemon=True)
    try:
        helper.start()
        with pytest.raises(KeyboardInterrupt):
            pipe.wait(None)
        interrupted.set()
        helper.join(60)
        assert not fallback, "the main thread slept through a SIGINT another thread took"
        assert signal.set_wakeup_fd(fd_before) == fd_before, "the wait left its pipe as the wakeup fd"
    finally:
        interrupted.set()
        signal.signal(signal.SIGINT, before)
        pipe.close()
