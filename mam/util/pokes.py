"""Wake-ups between processes of one workspace: a waiter sleeps until something it waits for may have
changed, and whoever changes it pokes; nobody polls on a fixed short interval.

A `Waiter` is one FIFO, created under `.mam/run/wake/` and hard-linked there under one name per key it
listens to (`<hash of the key>.<pid>.<random>`); it is open (read and write, so it never reads EOF)
for as long as the waiter lives. `poke(ws, key)` writes one byte to every FIFO listening to `key`,
without blocking: a full FIFO already holds a wake-up, and a FIFO nobody has open any more (its
waiter died) is removed. A FIFO has no path-length limit (a Unix socket's is 108 bytes) and needs no
port. A poke carries no data: it only says "look again", so a stray or lost poke costs a look, or
waits until the waiter's own deadline, never a wrong answer. The keys in use:

- `events:<id>`: the agent's `mam event` (mam.jobs.emit) committed an event of the job: its wrapper
  reads it from the store (and relays it to MQTT); the emitter publishes it itself only when no
  waiter heard this key (the wrapper is gone);
- `job:<id>`: the job's row changed (a cancel, the monitor, a take-over; or an event nobody relays):
  its wrapper and whoever follows it from outside (`mam job wait`) look;
- `ended:<id>`: the job ended (its heartbeater stops; it sleeps through the job's other changes);
- `session:<name>`: a job of the session changed state (an earlier job ended: the next one may go);
- `parent:<id>`: a sub-job of that job changed state (the loop waits for a round's sub-jobs);
- `ended`: some job of the workspace ended (whoever waits for a free slot);
- `hold`: the workspace's hold was set or released (`mam pause --all`, `mam resume --all`: mam.jobs.pause);
- `loop:<id>`: a person approved or rejected a loop waiting in `needs_approval` (mam.loop.approval);
- `routines`: the node's routine thread decided what was due (`mam routine run` waits for its tick: mam.routines).

`mam.store.journal.commit` pokes them after every commit that changed a row, mam.jobs.emit after every
event. The files themselves are handled in mam.util.pokefifo (which also refuses a folder or a FIFO
another user could use).
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable, Iterable
from pathlib import Path

from mam.util import pokefifo
from mam.util.fdwait import readable
from mam.util.pokefifo import job_key
from mam.workspace import Workspace

__all__ = [
    "ENDED",
    "HOLD",
    "Waiter",
    "events_key",
    "folder",
    "job_ended_key",
    "job_key",
    "parent_key",
    "poke",
    "session_key",
]

ENDED = "ended"
HOLD = "hold"
ROUTINES = "routines"


def folder(ws: Workspace) -> Path:
    return ws.run_dir / "wake"


def session_key(name: str) -> str:
    return f"session:{name}"


def events_key(job_id: str) -> str:
    return f"events:{job_id}"


def parent_key(job_id: str) -> str:
    return f"parent:{job_id}"


def loop_key(loop_id: str) -> str:
    return f"loop:{loop_id}"


def job_ended_key(job_id: str) -> str:
    return f"ended:{job_id}"


class Waiter(pokefifo.Fifo):
    """A FIFO listening to `keys`; `wait(timeout)` returns when poked (True) or at the timeout (False)."""

    def __init__(self, ws: Workspace, keys: Iterable[str]) -> None:
        self._relay: threading.Thread | None = None
        self._closing = False
        super().__init__(str(folder(ws)), keys)

    def relay(self, to: Callable[[], None]) -> None:
        """From now on, a thread calls `to()` on each poke (for a waiter that sleeps on something else,
        such as the wrapper on its queue of MQTT messages). The thread sleeps in select, without a timeout."""
        if self._relay is not None:
            return

        def run() -> None:
            while True:
                readable([self.fd], None)
                self.drain()
                if self._closing:
                    return
                to()

        self._relay = threading.Thread(target=run, name="mam-wake", daemon=True)
        self._relay.start()

    def close(self) -> None:
        if self._relay is not None:
            self._closing = True
            try:
                os.write(self.fd, b"\0")
            except OSError:
                pass
            self._relay.join(timeout=5)
            self._relay = None
        super().close()

    def __enter__(self) -> Waiter:
        return self

    def __exit__(self, *_exc: object) -> None:
        self.close()


def poke(ws: Workspace, keys: Iterable[str]) -> int:
    """Wake every waiter listening to one of `keys`; how many live waiters were poked (0: nobody listened).
    Never blocks, never raises."""
    return pokefifo.poke(str(folder(ws)), keys)
