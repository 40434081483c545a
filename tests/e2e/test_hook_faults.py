"""A hook that hangs or is SIGKILLed never blocks the agent or the job.

The fake claude runs mam's hooks as the real one does (waiting for each). Here `mam hook` gets
stuck for real: the test holds the job's lock, which every event writer takes, so the hook's
`activity` cannot be recorded. Hanging, it gives up by itself (its own budget, exit 0) and the
agent goes on; SIGKILLed, the agent goes on too. Once the lock is free the job completes, exit 0.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from mam.jobs.emit import job_lock
from mam.util.poll import wait_for
from mam.workspace import Workspace
from tests.e2e.test_hooks import create, hooked  # noqa: F401 (the fixture)


def hook_pids(ws: Workspace) -> list[int]:
    """`mam hook` processes of this workspace (matched by its path on their command line)."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            argv = (entry / "cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        if b"hook" in argv and str(ws.root).encode() in argv and b"mam" in argv:
            found.append(int(entry.name))
    return found


def logged(log: Path, event: str) -> list[dict[str, Any]]:
    if not log.exists():
        return []
    return [e for e in map(json.loads, log.read_text().splitlines()) if e["event"] == event]


@pytest.mark.parametrize("fault", ["hang", "kill"])
def test_a_stuck_hook_never_blocks_the_agent_or_the_job(hooked: Workspace, tmp_path: Path, fault: str) -> None:  # noqa: F811
    log = tmp_path / "agents.jsonl"
    create("claude", "stuck", log)
    job = f"job-hook-{fault}"
    with job_lock(hooked, job):  # every writer of the job's events waits on this
        proc = subprocess.Popen(
            [sys.executable, "-m", "mam", "job", "delegate", "--target", "tmux:stuck", "--brief",
             "work\nfake-work: 0.2", "--job-id", job, "--start-deadline", "60", "--timeout", "120", "--json"],
            stdout=subprocess.PIPE, text=True, env={**os.environ, "MAM_REMINDERS": "0"},
        )  # fmt: skip
        try:
            stuck = wait_for(lambda: hook_pids(hooked), timeout=30, message="no hook ran for the brief")
            if fault == "kill":
                for pid in stuck:
                    os.kill(pid, signal.SIGKILL)
            # the agent's hook call returned (by itself, or killed) while the job's lock is still held
            wait_for(lambda: any(e["hook"] == "UserPromptSubmit" for e in logged(log, "hook")), timeout=30)
        except BaseException:
            proc.kill()
            raise
    out, _ = proc.communicate(timeout=120)
    record = json.loads(out)
    assert proc.returncode == 0 and record["state"] == "completed", record
    # the agent went on: its later hooks ran, and none is left running
    wait_for(lambda: {"PreToolUse", "Stop"} <= {e["hook"] for e in logged(log, "hook")}, timeout=30)
    wait_for(lambda: not hook_pids(hooked), timeout=30, message=lambda: f"hooks left: {hook_pids(hooked)}")
