"""A self-pipe that wakes one waiting thread: from any other thread or a signal handler, holding no lock.

A KeyboardInterrupt raised inside `threading.Condition.wait` (or `queue.Queue.get`) can leave its lock
released twice: a RuntimeError and exit 1 instead of the interrupt's 130 (seen with `mam tail` in CI). A thread
that waits in poll(2) on this pipe holds no lock, so Ctrl-C there is only Ctrl-C. Used by `mam tail`
(mam.view.tail) and the fan-out's wait for its branches (mam.jobs.fanout).

A signal is handled at the C level by whichever thread the kernel hands it to; Python runs its handler (the
KeyboardInterrupt) in the main thread only when that thread next runs bytecode. A main thread asleep in poll(2)
while another thread took the SIGINT would sleep on until something else woke it (a fan-out's Ctrl-C once waited
out its branches' 60 s). So a wait in the main thread is also woken by every signal: this pipe is the
interpreter's wakeup fd (`signal.set_wakeup_fd`) for as long as it waits.
"""

from __future__ import annotations

import os
import signal
import threading

from mam.util.fdwait import readable


class WakePipe:
    def __init__(self) -> None:
        self._r, self._w = os.pipe()
        os.set_blocking(self._r, False)
        os.set_blocking(self._w, False)

    def wake(self) -> None:
        """Wake the waiter (lock-free; safe in a signal handler)."""
        try:
            os.write(self._w, b"\0")
        except OSError:  # full (a wake is pending anyway) or closed (the waiter is gone)
            pass

    def wait(self, timeout: float | None) -> bool:
        """Until woken (True) or `timeout` seconds pass (None: no limit); every pending wake is taken. In the
        main thread a signal wakes it too, so its Python handler runs at once."""
        prior = None
        if threading.current_thread() is threading.main_thread():
            prior = signal.set_wakeup_fd(self._w, warn_on_full_buffer=False)
        try:
            woken = readable([self._r], timeout)
        finally:
            if prior is not None:
                try:
                    signal.set_wakeup_fd(prior)
                except (OSError, ValueError):  # the one set before was closed meanwhile: none is left set
                    signal.set_wakeup_fd(-1)
        if not woken:
            return False
        try:
            while os.read(self._r, 4096):
                pass
        except BlockingIOError:
            pass
        return True

    def close(self) -> None:
        """Close both ends (a later `wake` does nothing): once nothing else will wake it, else a closed
        descriptor's number, reused, could be written to."""
        fds, (self._r, self._w) = (self._r, self._w), (-1, -1)
        for fd in fds:
            if fd >= 0:
                os.close(fd)
