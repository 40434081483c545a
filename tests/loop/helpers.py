"""Running `mam loop` from tests and reading what the loop left behind."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

from mam.workspace import Workspace
from tests.helpers.mamcli import mam

# Short deadlines: the demo agent answers in well under a second.
FAST_JOB = ["--start-deadline", "15", "--heartbeat", "0.5", "--timeout", "90"]


def run_loop(
    *args: str, env: dict[str, str] | None = None, timeout: float = 150
) -> tuple[int, dict[str, Any], subprocess.CompletedProcess[str]]:
    proc = mam("loop", "--json", *FAST_JOB, *args, env=env, timeout=timeout)
    try:
        summary = json.loads(proc.stdout) if proc.stdout.strip() else {}
    except ValueError:
        summary = {}
    return proc.returncode, summary, proc


def loop_dirs(ws: Workspace) -> list[Path]:
    return sorted((ws.state / "loops").glob("loop-*"))


def log_events(ws: Workspace, loop_id: str | None = None) -> list[dict[str, Any]]:
    folder = ws.state / "loops" / loop_id if loop_id else loop_dirs(ws)[-1]
    return [json.loads(line) for line in (folder / "loop.jsonl").read_text().splitlines()]


def events(log: list[dict[str, Any]], kind: str) -> list[dict[str, Any]]:
    return [e for e in log if e["event"] == kind]
