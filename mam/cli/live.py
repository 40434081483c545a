"""The live status line `mam job delegate` keeps on a terminal's stderr: state, last event, deadlines.

One line, redrawn in place about once a second and on every transition, cleared when the job ends
(what stays on the screen is the command's own result). Agent text is stripped of control
characters and cut to the terminal's width.
"""

from __future__ import annotations

import os
import re
import sys
import threading
import time
from typing import Any, TextIO

from mam.jobs.model import Job

_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f]")
CLEAR = "\r\x1b[2K"
COLUMNS = 100  # when the terminal does not say how wide it is


def _secs(ms: float) -> str:
    s = max(0, int(ms // 1000))
    return f"{s // 60}m{s % 60:02d}s" if s >= 60 else f"{s}s"


def status_line(job: Job, last: str, now_ms: int) -> str:
    """`job-... running · last: progress "msg" 3s ago · heartbeat due in 12s · timeout in 29m50s`."""
    reason = f" ({job.reason})" if job.reason and job.reason != job.state.value else ""
    parts = [f"{job.id} {job.state.value}{reason}"]
    if job.queued_for and job.state.value == "queued":
        parts.append(f"waiting for a {job.queued_for}")
    if last:
        since = job.last_event_ms or now_ms
        parts.append(f"last: {last} {_secs(now_ms - since)} ago")
    if job.waiting:
        parts.append(f"waiting for a person: {job.waiting.get('message') or job.waiting.get('tool') or ''}".rstrip())
    if not job.terminal:
        if job.started_ms is None and job.delivered_ms is not None:
            parts.append(f"start deadline in {_secs(job.delivered_ms + job.start_deadline_ms - now_ms)}")
        elif job.started_ms is not None:
            beat = (job.last_event_ms or job.started_ms) + job.heartbeat_ms * job.heartbeat_k
            parts.append(f"no-event deadline in {_secs(beat - now_ms)}")
        parts.append(f"timeout in {_secs(job.created_ms + job.budget_ms - now_ms)}")
    return _CONTROL.sub(" ", " · ".join(parts))


class LiveLine:
    """Keeps one status line on `out` (a terminal) while a job runs; `update` is the ledger's on_commit."""

    def __init__(self, out: TextIO | None = None, interval: float = 1.0) -> None:
        self.out = out or sys.stderr
        self.interval = interval
        self.job: Job | None = None
        self.last = ""
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def start(self, job: Job) -> None:
        self.job = job
        self._draw()
        self._thread = threading.Thread(target=self._tick, name="mam-live-line", daemon=True)
        self._thread.start()

    def update(self, job: Job, inp: Any) -> None:
        body = getattr(inp, "body", {}) or {}
        kind = getattr(inp, "type", "")
        if kind:
            message = str(body.get("message") or body.get("reason") or "")[:200]
            self.last = f'{kind} "{message}"' if message else str(kind)
        self.job = job
        self._draw()

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=2)
        with self._lock:
            self._write(CLEAR)

    def _tick(self) -> None:
        while not self._stop.wait(self.interval):
            self._draw()

    def _draw(self) -> None:
        job = self.job
        if job is None or self._stop.is_set():
            return
        width = max(20, self._columns() - 1)
        line = status_line(job, self.last, int(time.time() * 1000))
        if len(line) > width:
            line = line[: width - 1] + "…"
        with self._lock:
            self._write(CLEAR + line)

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
