"""The page's live state: `mam top`'s snapshot, re-read when `mam tail`'s feed or the workspace's files move.

One `Live` per server. A thread runs `mam.view.tail.Tail` (the broker says a job moved, the
registry says what; with the broker down it sweeps the registry) and turns each line into an
event for the pages. Another thread re-reads the snapshot when a line came, when the registry,
the mirror or a loop log changed (a stat a second: a session made or stopped moves no job), every
`BUSY_S` while a job is open (its deadline bars move) and every `IDLE_S` otherwise (a pane that
died), and sends it when it differs from the last. Nothing spins in between, and nothing is read
while no page is open. Looking starts nothing: no broker, server, pane or session.
"""

from __future__ import annotations

import asyncio
import json
import logging
import threading
import time
from pathlib import Path
from typing import Any

from mam.settings import Settings
from mam.view.feed import Line
from mam.view.model import snapshot
from mam.view.tail import Note, Tail
from mam.web.state import state_json
from mam.workspace import Workspace

log = logging.getLogger(__name__)
WATCH_S = 1.0
BUSY_S = 2.0
IDLE_S = 10.0
QUEUE_MAX = 256  # a page that cannot keep up loses lines; its next state catches it up
NOTES_KEPT = 5


class Live:
    def __init__(self, ws: Workspace, settings: Settings) -> None:
        self.ws, self.settings = ws, settings.with_overrides(MAM_NO_AUTOSTART="1")
        self.loop: asyncio.AbstractEventLoop | None = None
        self.pages: set[asyncio.Queue[tuple[str, str]]] = set()
        self.current: dict[str, Any] | None = None
        self.notes: list[str] = []
        self.stop = threading.Event()
        self.poke = threading.Event()
        self.tail: Tail | None = None
        self._broker_known = False
        self._lock = threading.Lock()  # one snapshot at a time

    # -- running ------------------------------------------------------------------------------
    def start(self, loop: asyncio.AbstractEventLoop) -> None:
        self.loop = loop
        self.tail = Tail(self.ws, self.settings, self._on_feed)
        threading.Thread(target=self._follow, name="mam-web-tail", daemon=True).start()
        threading.Thread(target=self._watch, name="mam-web-watch", daemon=True).start()

    def close(self) -> None:
        self.stop.set()
        self.poke.set()
        if self.tail is not None:
            self.tail.close()

    def _follow(self) -> None:
        assert self.tail is not None
        try:
            self.tail.run()
        except Exception as e:  # the page says so; the watcher keeps the state fresh from the registry
            log.warning("mam web: following the feed stopped: %s", e)
            self._on_feed(Note(f"following the feed stopped ({e}); reading the registry every {IDLE_S:.0f}s"))

    def broker(self) -> str:
        if self.tail is None or not (self._broker_known or self.tail.client is not None):
            return "unknown"
        return "up" if self.tail.broker_up else "down"

    # -- the feed -----------------------------------------------------------------------------
    def _on_feed(self, item: Line | Note) -> None:
        if isinstance(item, Note):
            self._broker_known = True
            self.notes = (self.notes + [f"{time.strftime('%H:%M:%S')} {item.message}"])[-NOTES_KEPT:]
            self._send("note", json.dumps({"message": item.message}))
        else:
            self._send("line", json.dumps(item.as_json(), ensure_ascii=False))
        self.poke.set()

    # -- the snapshot -------------------------------------------------------------------------
    def fresh(self) -> dict[str, Any]:
        """Read the snapshot now; send it to the pages if it changed."""
        with self._lock:
            state = state_json(snapshot(self.ws, self.settings, broker=self.broker()), notes=self.notes)
            before, self.current = self.current, state
        if before is None or _unstamped(before) != _unstamped(state):
            self._send("state", json.dumps(state, ensure_ascii=False, default=str))
        return state

    def _fingerprint(self) -> tuple[float, ...]:
        paths = [self.ws.db_path, Path(f"{self.ws.db_path}-wal"), self.ws.mirror_path]
        try:
            paths.extend(sorted((self.ws.state / "loops").glob("*/loop.jsonl")))
        except OSError:
            pass
        out: list[float] = [self.broker() == "up"]
        for p in paths:
            try:
                st = p.stat()
                out += [st.st_mtime_ns, st.st_size]
            except OSError:
                out += [0, 0]
        return tuple(out)

    def _watch(self) -> None:
        seen: tuple[float, ...] = ()
        last = 0.0
        while not self.stop.is_set():
            poked = self.poke.wait(WATCH_S)
            self.poke.clear()
            if self.stop.is_set():
                return
            if not self.pages:
                seen, last = (), 0.0  # nothing read while no page is open; the next page gets a fresh read
                continue
            now = time.monotonic()
            mark = self._fingerprint()
            busy = bool(self.current and self.current["jobs"])
            if poked or mark != seen or now - last >= (BUSY_S if busy else IDLE_S):
                seen, last = mark, now
                try:
                    self.fresh()
                except Exception as e:  # keep the last state; say what failed
                    log.warning("mam web: could not read the workspace: %s", e)
                    self._send("note", json.dumps({"message": f"could not read the workspace: {e}"}))

    # -- the pages ----------------------------------------------------------------------------
    def subscribe(self) -> asyncio.Queue[tuple[str, str]]:
        queue: asyncio.Queue[tuple[str, str]] = asyncio.Queue(QUEUE_MAX)
        self.pages.add(queue)
        self.poke.set()
        return queue

    def unsubscribe(self, queue: asyncio.Queue[tuple[str, str]]) -> None:
        self.pages.discard(queue)

    def _send(self, kind: str, data: str) -> None:
        if self.loop is not None and not self.loop.is_closed():
            self.loop.call_soon_threadsafe(self._fan_out, kind, data)

    def _fan_out(self, kind: str, data: str) -> None:
        for queue in list(self.pages):
            if not queue.full():
                queue.put_nowait((kind, data))


def _unstamped(state: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in state.items() if k not in ("taken_ms", "header")}
