"""The heartbeater's pid file, which the wrapper reads to restart a sandboxed agent's heartbeater:
it names the process with its start time, goes away when the heartbeater stops by itself, and
stays when the heartbeater could never see the agent (codex's sandbox has its own pid namespace)."""

from __future__ import annotations

import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from mam.jobs import heartbeat
from mam.jobs.ledger import Ledger, new_owner
from mam.jobs.model import Job, JobState
from mam.store.registry import Registry
from mam.util.poll import wait_for
from mam.util.proc import start_time
from mam.workspace import Workspace

JOB = "job-0123456789abcdef"


@pytest.fixture
def ws(tmp_path: Path) -> Iterator[Workspace]:
    ws = Workspace(tmp_path / "ws")
    ws.root.mkdir()
    registry = Registry(ws)
    job = Job(
        id=JOB,
        session="s",
        nonce="n" * 16,
        created_ms=1,
        start_deadline_ms=60_000,
        heartbeat_ms=60_000,
        heartbeat_k=4,
        budget_ms=3_600_000,
        state=JobState.RUNNING,
        claimed_ms=1,
        delivered_ms=1,
        started_ms=1,
    )
    Ledger.register(ws, registry, job, owner=new_owner(), meta={"target": "s", "kind": "job", "topic_prefix": "t"})
    registry.close()
    yield ws


def _log(ws: Workspace) -> str:
    path = ws.job_log_dir(JOB) / "heartbeat.log"
    return path.read_text() if path.exists() else ""


def test_a_heartbeater_whose_agent_dies_removes_its_pid_file(ws: Workspace) -> None:
    agent = subprocess.Popen(["sleep", "60"])
    try:
        beater = heartbeat.spawn(ws, JOB, 0.2, agent.pid)
        found = heartbeat.recorded(ws, JOB)
        assert found == (beater.pid, start_time(beater.pid)) and heartbeat.is_running(ws, JOB)
        wait_for(lambda: "stopped" not in _log(ws) and heartbeat.is_running(ws, JOB), timeout=10)
    finally:
        agent.kill()
        agent.wait()
    assert beater.wait(timeout=30) == 0
    assert heartbeat.recorded(ws, JOB) is None
    assert "stopped: agent_gone" in _log(ws)


def test_a_heartbeater_that_cannot_see_the_agent_keeps_its_pid_file_for_the_wrapper(ws: Workspace) -> None:
    gone = subprocess.Popen(["true"])
    gone.wait()
    beater = heartbeat.spawn(ws, JOB, 0.2, gone.pid)
    assert beater.wait(timeout=30) == 0
    assert heartbeat.recorded(ws, JOB) is not None and not heartbeat.is_running(ws, JOB)
    assert "stopped: agent_unseen" in _log(ws)


def test_a_reused_pid_is_not_taken_for_the_heartbeater(ws: Workspace) -> None:
    folder = ws.job_log_dir(JOB)
    folder.mkdir(parents=True, exist_ok=True)
    (folder / heartbeat.PIDFILE).write_text(f"1 {(start_time(1) or 0) + 1}\n")  # pid 1 lives, with another start time
    assert not heartbeat.is_running(ws, JOB)
