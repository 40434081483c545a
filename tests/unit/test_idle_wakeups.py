"""An idle wrapper sleeps: its follow loop wakes for a deadline, a message or a poke, never on a fixed
short clock; a cancel from another writer and the end of the job ahead wake it at once (mam.util.pokes).

The slow clocks (ABANDONED_CHECK_S, DISK_CHECK_S) are set to an hour here, so only a poke can end the
waits below in time; MAM_POLL_S is 0.02 s, so a loop that slept `poll_s` would wake ~50 times a second.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from mam.jobs import attempt as attempt_mod
from mam.jobs.attempt import JobAttempt
from mam.jobs.ledger import Ledger, new_owner
from mam.jobs.model import Job, JobState
from mam.jobs.stale import cancel
from mam.settings import load_settings
from mam.store.registry import Registry
from mam.util import pokes
from mam.util.poll import wait_for
from mam.workspace import Workspace

HOUR = 3600.0
IDLE_WINDOW_S = 1.0


class QuietDelivery:
    confirms_itself = False

    def __init__(self) -> None:
        self.injected = threading.Event()

    def find_target(self, wait_s: float = 0.0) -> str:
        return ""

    def check_alive(self) -> str:
        return ""

    def inject(self, text: str, ledger: Ledger) -> None:
        self.injected.set()

    def rejoin(self, text: str, ledger: Ledger) -> None:
        return None

    def nudge(self, ledger: Ledger) -> None:
        return None

    def keep_heartbeat(self, ledger: Ledger) -> None:
        return None

    def due(self, ledger: Ledger) -> float | None:
        return None

    def finish(self, ledger: Ledger) -> None:
        return None


class AnnouncedEvents:
    """Events would arrive as messages (a broker connection that is up); none comes."""

    reads_store = True

    def connect(self) -> str:
        return ""

    def open(self, intake: object) -> str:
        return ""

    def lost(self) -> bool:
        return False

    def announced(self) -> bool:
        return True

    def close(self, ledger: Ledger) -> None:
        return None


@pytest.fixture
def world(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[Workspace, Registry]]:
    monkeypatch.setattr(attempt_mod, "ABANDONED_CHECK_S", HOUR)
    monkeypatch.setattr(attempt_mod, "DISK_CHECK_S", HOUR)
    ws = Workspace(tmp_path / "ws")
    ws.root.mkdir()
    ws.ensure_state()
    registry = Registry(ws)
    yield ws, registry
    registry.close()


def register(ws: Workspace, registry: Registry, job_id: str, state: JobState) -> Ledger:
    running = state is JobState.RUNNING
    job = Job(
        id=job_id,
        session="s",
        nonce="n" * 16,
        created_ms=int(time.time() * 1000),
        start_deadline_ms=int(HOUR * 1000),
        heartbeat_ms=int(HOUR * 1000),
        heartbeat_k=4,
        budget_ms=int(HOUR * 1000),
        state=state,
        claimed_ms=int(time.time() * 1000) if running else None,
        delivered_ms=int(time.time() * 1000) if running else None,
        started_ms=int(time.time() * 1000) if running else None,
    )
    meta = {"target": "s", "kind": "job", "topic_prefix": "t"}
    return Ledger.register(ws, registry, job, owner=new_owner(), meta=meta)


def start(
    ws: Workspace, registry: Registry, ledger: Ledger, delivery: QuietDelivery
) -> tuple[JobAttempt, threading.Thread]:
    settings = load_settings(environ={"MAM_POLL_S": "0.02", "MAM_DISPATCH_WAIT_S": str(HOUR)})
    attempt = JobAttempt(
        ledger, registry=registry, settings=settings, text="brief", delivery=lambda: delivery, events=AnnouncedEvents()
    )
    thread = threading.Thread(target=attempt.run, daemon=True)
    thread.start()
    return attempt, thread


def test_an_idle_wrapper_sleeps_and_a_cancel_wakes_it(world: tuple[Workspace, Registry]) -> None:
    ws, registry = world
    ledger = register(ws, registry, "job-00000000000000a1", JobState.RUNNING)
    attempt, thread = start(ws, registry, ledger, QuietDelivery())
    wait_for(lambda: attempt.waiter is not None and attempt.waiter._relay is not None, timeout=10)
    before = attempt.wakes
    time.sleep(IDLE_WINDOW_S)  # the window measured: nothing happens in it
    idle = attempt.wakes - before
    assert idle <= 2, f"an idle wrapper woke {idle} times in {IDLE_WINDOW_S} s"
    cancel(ws, Registry(ws), ledger.job.id)  # another writer: only its poke can wake the loop
    thread.join(timeout=30)
    assert not thread.is_alive(), "the cancel did not wake the wrapper"
    assert attempt.ledger.job.state is JobState.CANCELLED
    assert not list(pokes.folder(ws).iterdir()), "the wrapper left its FIFO behind"


def test_the_turn_wait_is_woken_when_the_job_ahead_ends(world: tuple[Workspace, Registry]) -> None:
    ws, registry = world
    ahead = register(ws, registry, "job-00000000000000b1", JobState.RUNNING)
    mine = register(ws, registry, "job-00000000000000b2", JobState.PENDING)
    delivery = QuietDelivery()
    attempt, thread = start(ws, registry, mine, delivery)
    wait_for(lambda: any(line.get("kind") == "waiting" for line in _audit(ws, mine.job.id)), timeout=10)
    assert not delivery.injected.is_set()
    cancel(ws, Registry(ws), ahead.job.id)
    assert delivery.injected.wait(30), "the end of the job ahead did not wake the turn wait"
    cancel(ws, Registry(ws), mine.job.id)
    thread.join(timeout=30)
    assert not thread.is_alive()


def _audit(ws: Workspace, job_id: str) -> list[dict[str, object]]:
    from mam.jobs.record import read_audit

    return list(read_audit(ws, job_id))


def test_the_heartbeater_sleeps_on_the_agent_s_pidfd_until_it_exits(tmp_path: Path) -> None:
    """Between two beats the heartbeater waits on the agent's pidfd: no look at the process until it ends."""
    import subprocess

    from mam.jobs.heartbeat import Watch
    from mam.util.proc import pid_alive

    agent = subprocess.Popen(["sleep", "60"])
    looks = 0

    def alive() -> bool:
        nonlocal looks
        looks += 1
        return pid_alive(agent.pid)

    ws = Workspace(tmp_path / "ws")
    watch = Watch([agent.pid], alive, pokes.Waiter(ws, [pokes.job_key("job-0123456789abcdef")]))
    try:
        if watch.polling:
            pytest.skip("no pidfd here (macOS or a kernel before 5.3): the heartbeater polls")
        answer: list[str] = []
        waiting = threading.Thread(target=lambda: answer.append(watch.until(time.monotonic() + HOUR, lambda: "")))
        waiting.start()
        time.sleep(IDLE_WINDOW_S)  # the window measured: the agent runs on
        assert looks <= 1, f"the heartbeater looked at its agent {looks} times in {IDLE_WINDOW_S} s"
        agent.kill()
        agent.wait()
        waiting.join(timeout=30)
        assert answer == ["agent_gone"], "the agent's exit did not wake the heartbeater"
    finally:
        watch.close()
        if agent.poll() is None:
            agent.kill()
            agent.wait()
