"""An exclusive lock on a file between processes: flock(2) on the file, held as a context manager or by
acquire/release; the kernel frees it when its holder dies.

What the filelock package did for mam, without its import (it imports asyncio: about 35 ms of every command
that writes a session row, which rewrites the sessions mirror under this lock). As there, the lock belongs to
the instance: a second instance on the same file, in this process or another, waits for the first; taking an
instance it already holds again only counts (released when every hold is given back).
"""

from __future__ import annotations

import fcntl
import os
import time

MAX_BACKOFF_S = 0.05  # the longest pause between two tries of a lock with a time limit


class LockTimeout(Exception):
    """The lock was still held by another after the time limit."""

    def __init__(self, path: str) -> None:
        super().__init__(f"the lock {path} is held by another process")
        self.path = path


class FileLock:
    """`path`'s lock (the file is made, 0600, if missing). `timeout`: how long `acquire` waits, in seconds (None:
    as long as it takes, in one blocking call; 0: one try)."""

    def __init__(self, path: str, timeout: float | None = None) -> None:
        self.path = path
        self.timeout = timeout
        self._fd: int | None = None
        self._holds = 0

    def acquire(self, timeout: float | None = -1.0) -> FileLock:
        """Take the lock, waiting `timeout` s (default: the instance's); LockTimeout when it stays taken."""
        if self._fd is not None:
            self._holds += 1
            return self
        limit = self.timeout if timeout == -1.0 else timeout
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
        try:
            if limit is None:
                fcntl.flock(fd, fcntl.LOCK_EX)
            else:
                self._try_until(fd, time.monotonic() + limit)
        except BaseException:
            os.close(fd)
            raise
        self._fd, self._holds = fd, 1
        return self

    def _try_until(self, fd: int, deadline: float) -> None:
        """flock with a time limit: the kernel has none, so try, and pause (5 ms, doubling to MAX_BACKOFF_S)."""
        pause = 0.005
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                return
            except BlockingIOError:
                left = deadline - time.monotonic()
                if left <= 0:
                    raise LockTimeout(self.path) from None
                time.sleep(min(pause, left))
                pause = min(pause * 2, MAX_BACKOFF_S)

    def release(self) -> None:
        if self._fd is None:
            return
        self._holds -= 1
        if self._holds == 0:
            fd, self._fd = self._fd, None
            os.close(fd)  # closing the last descriptor of the open file frees the lock

    def __enter__(self) -> FileLock:
        return self.acquire()

    def __exit__(self, *_: object) -> None:
        self.release()
