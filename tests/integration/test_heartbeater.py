"""The heartbeater `mam event started --heartbeat N` starts (mam/jobs/heartbeat.py, a new interpreter).

Its first beat comes one interval after `started`; meanwhile it waits on the agent's pidfd and on a
poke of the job's key (mam.util.pokes): a job that ends (or an agent that dies) within an interval
stops it at once (`stopped: ...` in heartbeat.log, its pid file removed) having sent no beat, so a
prompt stop with N = 600 s shows the wait did it. A job that outlives N gets a beat every N.

A real `mam event` process against a job registered in a temporary workspace, with a wrapper's
Waiter listening on the job's `events:<id>` key, as in tests/integration/test_event_command.py.
"""

from __future__ import annotations

import os
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from mam.jobs import heartbeat
from mam.jobs.ledger import Ledger
from mam.jobs.model import End, JobState
from mam.jobs.record import now_ms
from mam.outcomes import Exit, Reason
from mam.store.registry import Registry
from mam.util import pokes
from mam.util.poll import wait_for
from mam.util.proc import pid_alive, start_time
from mam.workspace import Workspace
from tests.helpers.jobs import register_delivered

LONG_S = 600  # an interval no test waits for: a stop within seconds is the lean wait's


class World:
    def __init__(self, ws: Workspace, registry: Registry, ledger: Ledger, agent: subprocess.Popen[bytes]) -> None:
        self.ws, self.registry, self.ledger, self.agent = ws, registry, ledger, agent
        self.id = ledger.job.id

    def started(self, interval_s: float) -> tuple[int, int | None]:
        """`mam event started --heartbeat interval_s`, as the agent runs it; the heartbeater's (pid, start)."""
        proc = subprocess.run(
            [sys.executable, "-m", "mam", "event", "started", "--job", self.id, "--heartbeat", str(interval_s)],
            cwd=self.ws.root,
            env={**os.environ, "MAM_WORKSPACE": str(self.ws.root), "MAM_AGENT_PID": str(self.agent.pid)},
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert proc.returncode == 0 and "handed to the wrapper" in proc.stdout, proc.stdout + proc.stderr
        found = heartbeat.recorded(self.ws, self.id)
        assert found is not None, "no heartbeat.pid once `started` returned"
        return found

    def beats(self) -> list[float]:
        """When each heartbeat of the heartbeater was recorded (time.time())."""
        return [e.recorded_at for e in self.registry.events_after(self.id) if e.sender == "heartbeater"]

    def log(self) -> str:
        path = self.ws.job_log_dir(self.id) / heartbeat.LOG
        return path.read_text() if path.exists() else ""

    def end(self) -> None:
        self.ledger.apply(
            End(at=now_ms(), state=JobState.CANCELLED, reason=Reason.CANCELLED_BY_USER, exit_code=Exit.NOT_DELIVERED)
        )

    def fifos(self, pid: int) -> list[str]:
        """The FIFOs of mam.util.pokes the process `pid` left under `.mam/run/wake/`."""
        folder = pokes.folder(self.ws)
        return [n for n in os.listdir(folder) if f".{pid}." in n] if folder.exists() else []


@pytest.fixture
def world(tmp_path: Path) -> Iterator[World]:
    ws = Workspace((tmp_path / "ws").resolve())
    ws.root.mkdir()
    registry = Registry(ws)
    ledger = register_delivered(ws, registry, topic_prefix="test/lean")
    job = ledger.job
    wrapper = pokes.Waiter(ws, [pokes.events_key(job.id)])  # the wrapper's: the beats count on disk
    agent = subprocess.Popen(["sleep", "600"])
    w = World(ws, registry, ledger, agent)
    try:
        yield w
    finally:
        agent.kill()
        agent.wait()
        found = heartbeat.recorded(ws, job.id)
        if found is not None:
            wait_for(lambda: not pid_alive(*found), timeout=30)  # its agent is gone: it stops by itself
        wrapper.close()
        registry.close()


def test_a_job_that_ends_within_the_first_interval_stops_its_heartbeater_at_once(world: World) -> None:
    pid, start = world.started(LONG_S)
    wait_for(lambda: world.fifos(pid), timeout=10, message="the heartbeater does not listen for the job's pokes")
    assert pid_alive(pid, start) and "stopped" not in world.log()
    world.end()
    wait_for(lambda: not pid_alive(pid, start), timeout=10)
    assert f"stopped: job_ended: job {world.id} already ended: cancelled (cancelled_by_user)" in world.log()
    assert world.log().count("stopped") == 1
    assert heartbeat.recorded(world.ws, world.id) is None, "the pid file stays"
    assert world.fifos(pid) == [], "the heartbeater's FIFO stays"
    assert world.beats() == [], "a beat within the first interval"


def test_an_agent_that_dies_within_the_first_interval_stops_its_heartbeater_at_once(world: World) -> None:
    pid, start = world.started(LONG_S)
    wait_for(lambda: world.fifos(pid), timeout=10, message="the heartbeater does not listen for the job's pokes")
    world.agent.kill()
    world.agent.wait()
    wait_for(lambda: not pid_alive(pid, start), timeout=10)
    assert "stopped: agent_gone" in world.log()
    assert heartbeat.recorded(world.ws, world.id) is None and world.fifos(pid) == []
    assert world.beats() == []


def test_a_job_longer_than_the_interval_still_gets_a_beat_every_interval(world: World) -> None:
    interval = 1.5
    pid, start = world.started(interval)
    wait_for(lambda: len(world.beats()) >= 3, timeout=30)
    beats = world.beats()
    gaps = [b - a for a, b in zip(beats, beats[1:], strict=False)]
    # A beat every interval: the pokes of its own beats do not make it beat again.
    assert interval * 0.9 <= gaps[0] < interval * 1.9, gaps
    assert interval * 0.9 <= gaps[1] < interval * 1.9, gaps
    assert pid_alive(pid, start) and "stopped" not in world.log()
    world.end()
    wait_for(lambda: not pid_alive(pid, start), timeout=interval * 4 + 10)
    assert "stopped: job_ended:" in world.log() and heartbeat.recorded(world.ws, world.id) is None
    assert world.log().count("stopped") == 1


def test_a_job_that_ended_before_the_heartbeater_listened_stops_it_at_once(world: World) -> None:
    """The end's poke went out before the heartbeater's FIFO existed (it was starting): its first look at the
    job, made once it listens, sees the end, so it neither waits an interval nor beats."""
    world.end()
    outcome: list[str] = []
    beating = threading.Thread(
        target=lambda: outcome.append(
            heartbeat.run(world.ws, world.id, LONG_S, world.agent.pid, start_time(world.agent.pid))
        ),
        daemon=True,
    )
    beating.start()
    beating.join(timeout=30)
    assert not beating.is_alive(), "the heartbeater waited for an interval on a job that had ended"
    assert outcome and outcome[0].startswith("job_ended:"), outcome
    assert world.beats() == []
