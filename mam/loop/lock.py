"""One loop per checkout: a non-blocking file lock in `.mam/locks/`, plus a note naming its holder.

The lock is keyed by the checkout the loop reviews, so loops in two worktrees of one
workspace can run side by side while a second loop on the same checkout is refused.
The kernel drops the lock when its process dies, so a crashed loop never blocks the next.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from mam.errors import LockBusy
from mam.util.flock import FileLock, LockTimeout
from mam.util.fs import atomic_write_json
from mam.workspace import Workspace, workspace_slug


def lock_name(checkout: Path) -> str:
    return f"loop-{workspace_slug(checkout.resolve())}"


@contextmanager
def loop_lock(ws: Workspace, checkout: Path, *, loop_id: str, task: str) -> Iterator[Path]:
    """Hold the checkout's loop lock for the duration; LockBusy (exit 4) naming the running loop if taken."""
    ws.ensure_state()
    name = lock_name(checkout)
    note = ws.locks_dir / f"{name}.json"
    lock = FileLock(str(ws.lock(name)), timeout=0)
    try:
        lock.acquire()
    except LockTimeout as e:
        raise LockBusy(
            f"another loop is already running on {checkout}: {_describe(note)}; wait for it to end "
            f"(or stop that process) before starting a new one",
            checkout=str(checkout),
        ) from e
    try:
        atomic_write_json(
            note,
            {
                "loop_id": loop_id,
                "pid": os.getpid(),
                "started": time.time(),
                "checkout": str(checkout),
                "task": task[:200],
            },
            mode=0o600,
            fsync=False,
        )
        yield note
    finally:
        try:
            note.unlink()
        except FileNotFoundError:
            pass
        lock.release()


def _describe(note: Path) -> str:
    try:
        data = json.loads(note.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return "its details are not recorded yet"
    started = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(float(data.get("started", 0))))
    task = str(data.get("task", "")).splitlines()[0][:80] if data.get("task") else ""
    return f"loop {data.get('loop_id')} (pid {data.get('pid')}, started {started}, task {task!r})"
