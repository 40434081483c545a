"""Where a loop keeps its things: `.mam/loops/<loop-id>/` with the log, the plan and one folder per round.

loop.jsonl                     the loop log (one JSON object per line)
plan.md                        the plan (when there is a planning phase)
round-<n>/brief-<session>.md   every brief the loop sent in that round
round-<n>/report-<reviewer>.md the reports of the round's kept attempt
round-<n>/discarded-<k>/       an attempt whose approvals were discarded (the source changed)
"""

from __future__ import annotations

import json
import logging
import re
import secrets
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from mam.ids import check_loop_id
from mam.util.fs import append_line
from mam.workspace import Workspace

LoopEvent = dict[str, Any]
OnEvent = Callable[[LoopEvent], None]


def new_loop_id() -> str:
    return f"loop-{time.strftime('%Y%m%d-%H%M%S')}-{secrets.token_hex(3)}"


def loop_folder(ws: Workspace, loop_id: str) -> Path:
    return ws.state / "loops" / loop_id


class LoopFiles:
    def __init__(self, ws: Workspace, loop_id: str) -> None:
        self.ws, self.loop_id = ws, check_loop_id(loop_id)
        self.root = loop_folder(ws, loop_id)
        self.root.mkdir(parents=True, exist_ok=True, mode=0o700)

    @property
    def log(self) -> Path:
        return self.root / "loop.jsonl"

    @property
    def plan(self) -> Path:
        return self.root / "plan.md"

    def round_dir(self, number: int) -> Path:
        folder = self.root / f"round-{number}"
        folder.mkdir(exist_ok=True)
        return folder

    def report(self, number: int, reviewer: str) -> Path:
        return self.round_dir(number) / f"report-{reviewer}.md"

    def brief(self, number: int, session: str, kind: str) -> Path:
        return self.round_dir(number) / f"brief-{kind}-{session}.md"

    def discard(self, number: int) -> Path:
        """Move the round's current reports and review briefs aside; return the folder they went to."""
        folder = self.round_dir(number)
        k = 1
        while (folder / f"discarded-{k}").exists():
            k += 1
        target = folder / f"discarded-{k}"
        target.mkdir()
        for path in [*folder.glob("report-*.md"), *folder.glob("brief-review-*.md")]:
            path.rename(target / path.name)
        return target


class LoopLog:
    """The loop's append-only log; every entry is also handed to `on_event` (thread-safe)."""

    def __init__(self, path: Path, loop_id: str, on_event: OnEvent | None = None) -> None:
        self.path, self.loop_id, self.on_event = path, loop_id, on_event
        self._lock = threading.Lock()

    def __call__(self, event: str, **fields: Any) -> LoopEvent:
        entry: LoopEvent = {"ts": round(time.time(), 3), "loop": self.loop_id, "event": event, **fields}
        with self._lock:
            append_line(self.path, json.dumps(entry, sort_keys=True, ensure_ascii=False, default=str))
            if self.on_event is not None:
                try:
                    self.on_event(entry)
                except Exception:  # a broken printer must not break the loop; the log line is written
                    logging.getLogger(__name__).warning("on_event failed for %s", event, exc_info=True)
        return entry


def task_slug(task: str, limit: int = 48) -> str:
    """A folder name for the task's promoted reports: its first words, lower case, [a-z0-9-]."""
    words = re.sub(r"[^a-z0-9]+", "-", task.lower()).strip("-")
    slug = words[:limit].rstrip("-")
    return slug or "task"
