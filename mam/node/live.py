"""The live status line `mam job delegate` and `mam job wait` keep on a terminal's stderr: state, last
event, deadlines.

One line, redrawn in place about once a second and on every transition, cleared when the job ends and
before any other line is printed (what stays on the screen is the command's own output). It is drawn from
the node's progress frames (mam.node.service.snapshot: the job's fields as a dict). Agent text is
stripped of control characters and cut to the terminal's width.
"""

from __future__ import annotations

import os
import sys
import threading
import time

TYPE_CHECKING = False  # not `typing`'s: the thin client imports this module on a terminal
if TYPE_CHECKING:
    from typing import Any, TextIO

_CONTROL = {c: " " for c in [*range(0x20), *range(0x7F, 0xA0)]}
CLEAR = "\r\x1b[2K"
COLUMNS = 100  # when the terminal does not say how wide it is
ECHO_ROOM = 3  # columns left free at the right: a terminal echoes Ctrl-C as `^C` after the line; were the
# line to reach the last column, the echo would wrap to a new line and the clear would leave the live line
# (and a stray `^`) on the screen above the next message


def _secs(ms: float) -> str:
    s = max(0, int(ms // 1000))
    return f"{s // 60}m{s % 60:02d}s" if s >= 60 else f"{s}s"


def status_line(job: dict[str, Any], last: str, now_ms: int) -> str:
    """`job-... running · last: progress "msg" 3s ago · no-event deadline in 12s · timeout in 29m50s`; a job
    waiting for its turn says what for: `job-... pending · waiting for job-... (running) on session dev-1`."""
    state, reason = str(job.get("state") or ""), str(job.get("reason") or "")
    parts = [f"{job.get('id')} {state}{f' ({reason})' if reason and reason != state else ''}"]
    if job.get("waits") and not job.get("terminal"):  # the job ahead of it, the hold (mam.jobs.queries.waits_for)
        parts.append(str(job["waits"]))
    elif job.get("queued_for") and not job.get("terminal"):  # set only while queued (mam.jobs.model)
        parts.append(f"waiting for a {job['queued_for']}")
    if last:
        since = job.get("last_event_ms") or now_ms
        parts.append(f"last: {last} {_secs(now_ms - since)} ago")
    waiting = job.get("waiting")
    if waiting:
        parts.append(f"waiting for a person: {waiting.get('message') or waiting.get('tool') or ''}".rstrip())
    if not job.get("terminal"):
        started, delivered = job.get("started_ms"), job.get("delivered_ms")
        if started is None and delivered is not None:
            parts.append(f"start deadline in {_secs(delivered + job['start_deadline_ms'] - now_ms)}")
        elif started is not None:
            beat = (job.get("last_event_ms") or started) + job["heartbeat_ms"] * job["heartbeat_k"]
            parts.append(f"no-event deadline in {_secs(beat - now_ms)}")
        parts.append(f"timeout in {_secs(job['created_ms'] + job['budget_ms'] - now_ms)}")
    return " · ".join(parts).translate(_CONTROL)


class LiveLine:
    """Keeps one status line on `out` (a terminal) while a job runs; `update` takes a progress frame."""

    def __init__(self, out: TextIO | None = None, interval: float = 1.0) -> None:
        self.out = out or sys.stderr
        self.interval = interval
        self.job: dict[str, Any] | None = None
        self.last = ""
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._drawn = False  # a line is on the screen

    def update(self, progress: dict[str, Any]) -> None:
        """A progress frame's body (`job`, `type`, `message`): redraw with it."""
        kind, message = progress.get("type") or "", progress.get("message") or ""
        if kind:
            self.last = f'{kind} "{message}"' if message else str(kind)
        self.job = progress.get("job") or self.job
        self._draw()
        if self._thread is None and not self._stop.is_set():
            self._thread = threading.Thread(target=self._tick, name="mam-live-line", daemon=True)
            self._thread.start()

    def stop(self) -> None:
        """Stop redrawing and clear the line."""
        if self._stop.is_set():
            return
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=2)
        with self._lock:
            self._clear()

    def print(self, text: str) -> None:
        """`text` as a line of its own: the live line cleared first and drawn again after it."""
        with self._lock:
            self._clear()
            self._write(text + "\n")
        self._draw()

    def _clear(self) -> None:
        if self._drawn:
            self._write(CLEAR)
            self._drawn = False

    def _tick(self) -> None:
        while not self._stop.wait(self.interval):
            self._draw()

    def _draw(self) -> None:
        job = self.job
        if job is None or self._stop.is_set():
            return
        width = max(20, self._columns() - ECHO_ROOM)
        line = status_line(job, self.last, int(time.time() * 1000))
        if len(line) > width:
            line = line[: width - 1] + "…"
        with self._lock:
            self._write(CLEAR + line)
            self._drawn = True

    def _columns(self) -> int:
        try:
            return os.get_terminal_size(self.out.fileno()).columns or COLUMNS
        except (OSError, ValueError, AttributeError):
            return COLUMNS

    def _write(self, text: str) -> None:
        try:
            self.out.write(text)
            self.out.flush()
        except (OSError, ValueError):
            pass  # a closed terminal: the job goes on
