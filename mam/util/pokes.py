"""Wake-ups between processes of one workspace: a waiter sleeps until something it waits for may have
changed, and whoever changes it pokes; nobody polls on a fixed short interval.

A `Waiter` is one FIFO, created under `.mam/run/wake/` and hard-linked there under one name per key it
listens to (`<hash of the key>.<pid>.<random>`); it is open (read and write, so it never reads EOF)
for as long as the waiter lives. `poke(ws, key)` writes one byte to every FIFO listening to `key`,
without blocking: a full FIFO already holds a wake-up, and a FIFO nobody has open any more (its
waiter died) is removed. A FIFO has no path-length limit (a Unix socket's is 108 bytes) and needs no
port. A poke carries no data: it only says "look again", so a stray or lost poke costs a look, or
waits until the waiter's own deadline, never a wrong answer. The keys in use:

- `job:<id>`: the job's row changed (an event, a cancel, the monitor, a take-over): its wrapper looks;
- `session:<name>`: a job of the session changed state (an earlier job ended: the next one may go);
- `parent:<id>`: a sub-job of that job changed state (the loop waits for a round's sub-jobs);
- `ended`: some job of the workspace ended (whoever waits for a free slot).

`mam.store.journal.commit` pokes them after every commit that changed a row. (Not to be confused with
mam/jobs/wake.py: the socket on which `mam event` wakes a local job's wrapper for a new event.)
"""

from __future__ import annotations

import errno
import hashlib
import os
import secrets
import select
import stat
import threading
from collections.abc import Callable, Iterable
from pathlib import Path

from mam.workspace import Workspace

ENDED = "ended"


def folder(ws: Workspace) -> Path:
    return ws.run_dir / "wake"


def job_key(job_id: str) -> str:
    return f"job:{job_id}"


def session_key(name: str) -> str:
    return f"session:{name}"


def parent_key(job_id: str) -> str:
    return f"parent:{job_id}"


def _stem(key: str) -> str:
    return hashlib.sha256(key.encode("utf-8")).hexdigest()[:20]


class Waiter:
    """A FIFO listening to `keys`; `wait(timeout)` returns when poked (True) or at the timeout (False)."""

    def __init__(self, ws: Workspace, keys: Iterable[str]) -> None:
        self.dir = folder(ws)
        self.dir.mkdir(mode=0o700, parents=True, exist_ok=True)
        tag = f"{os.getpid()}.{secrets.token_hex(6)}"
        tmp = self.dir / f".new.{tag}"
        os.mkfifo(tmp, 0o600)
        # Open before it is visible under a key's name: a poker finding no reader removes the name.
        self.fd = os.open(tmp, os.O_RDWR | os.O_NONBLOCK)
        self.names: list[Path] = []
        try:
            for key in dict.fromkeys(keys):
                name = self.dir / f"{_stem(key)}.{tag}"
                os.link(tmp, name)
                self.names.append(name)
        finally:
            tmp.unlink()
        self._relay: threading.Thread | None = None
        self._closing = False

    def wait(self, timeout: float | None) -> bool:
        """Block until a poke or `timeout` seconds (None: no limit); drain what is pending."""
        ready, _w, _x = select.select([self.fd], [], [], None if timeout is None else max(0.0, timeout))
        if not ready:
            return False
        self._drain()
        return True

    def _drain(self) -> None:
        try:
            while os.read(self.fd, 512):
                pass
        except BlockingIOError:
            pass

    def relay(self, to: Callable[[], None]) -> None:
        """From now on, a thread calls `to()` on each poke (for a waiter that sleeps on something else,
        such as the wrapper on its queue of MQTT messages). The thread sleeps in select, without a timeout."""
        if self._relay is not None:
            return

        def run() -> None:
            while True:
                select.select([self.fd], [], [])
                self._drain()
                if self._closing:
                    return
                to()

        self._relay = threading.Thread(target=run, name="mam-wake", daemon=True)
        self._relay.start()

    def close(self) -> None:
        for name in self.names:
            try:
                name.unlink()
            except OSError:
                pass
        self.names = []
        if self._relay is not None:
            self._closing = True
            try:
                os.write(self.fd, b"\0")
            except OSError:
                pass
            self._relay.join(timeout=5)
            self._relay = None
        if self.fd >= 0:
            os.close(self.fd)
            self.fd = -1

    def __enter__(self) -> Waiter:
        return self

    def __exit__(self, *_exc: object) -> None:
        self.close()


def poke(ws: Workspace, keys: Iterable[str]) -> int:
    """Wake every waiter listening to one of `keys`; how many FIFOs were poked. Never blocks, never raises."""
    stems = {_stem(k) for k in keys}
    try:
        entries = list(os.scandir(folder(ws)))
    except OSError:
        return 0
    poked = 0
    for entry in entries:
        if entry.name.split(".", 1)[0] not in stems:
            continue
        try:
            fd = os.open(entry.path, os.O_WRONLY | os.O_NONBLOCK | os.O_NOFOLLOW)
        except OSError as e:
            if e.errno == errno.ENXIO:  # nobody has it open: its waiter is gone
                try:
                    os.unlink(entry.path)
                except OSError:
                    pass
            continue
        try:
            st = os.fstat(fd)
            if stat.S_ISFIFO(st.st_mode) and st.st_uid == os.geteuid():  # never write into anything else
                os.write(fd, b"\0")
                poked += 1
        except BlockingIOError:
            poked += 1  # full: a wake-up is pending already
        except OSError:
            pass
        finally:
            os.close(fd)
    return poked
