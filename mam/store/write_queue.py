"""The registry writers' queue: one flock every writer of a registry takes around its write
transaction, the store (mam.store.db) and every writer alike.

SQLite's own busy handler waits by sleeping, up to 100 ms a time, and serves nobody in order: with
hundreds of writers (500 sessions' wrappers and `mam event` commands) some waited out the whole
busy timeout ("database is locked"). A blocked flock is woken the moment its holder unlocks, so
writers take turns and SQLite's lock never has to wait. Transactions are short and wait on nothing
inside, and a holder that dies releases the flock. Lean: os and fcntl only.
"""

from __future__ import annotations

import fcntl
import os


def lock_path(db: str) -> str:
    """The queue's lock file for the registry at `db`: `<its folder>/locks/<its stem>-write.lock`."""
    folder, name = os.path.split(db)
    return os.path.join(folder, "locks", f"{os.path.splitext(name)[0]}-write.lock")


def open_lock(db: str) -> int:
    """A descriptor of the queue's lock file (made 0600 if missing); -1 where it cannot be had."""
    path = lock_path(db)
    try:
        os.makedirs(os.path.dirname(path), mode=0o700, exist_ok=True)
        return os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC | os.O_NOFOLLOW, 0o600)
    except OSError:
        return -1


def take(fd: int) -> None:
    """Wait for the writers' turn (-1: there is no queue to wait in)."""
    if fd >= 0:
        fcntl.flock(fd, fcntl.LOCK_EX)


def give(fd: int) -> None:
    if fd >= 0:
        fcntl.flock(fd, fcntl.LOCK_UN)
