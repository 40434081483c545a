"""The live status line of `mam job wait` and `mam job delegate` on a terminal (a real pseudo-terminal, its
bytes read): the same line for both, cleared before any other line, and naming what a waiting job waits for."""

from __future__ import annotations

import json
import signal
import subprocess

import pytest

from mam.util.poll import wait_for
from tests.e2e.test_delegate_output import SHORT, on_a_terminal
from tests.helpers.jobs import FAST, create_demo
from tests.helpers.mamcli import MAM, default_signals, mam, spawn_mam
from tests.helpers.terminal import Terminal

CLEAR = "\r\x1b[2K"


@pytest.fixture
def wired(workspace, amqtt_broker, monkeypatch):
    """The workspace wired to one broker: what the terminal shows does not depend on which."""
    for key, value in {**amqtt_broker.env(), **FAST}.items():
        monkeypatch.setenv(key, value)
    return workspace


def drawn(screen: str) -> list[str]:
    """Each line the live line drew (or a line printed between two)."""
    return [part for part in screen.split("\x1b[2K") if part.strip()]


def detached(brief: str) -> str:
    proc = mam("job", "delegate", "--target", "dev-1", "--brief", brief, *SHORT, "--detach", check=True)
    return proc.stdout.strip()


def open_jobs() -> list[dict]:
    return [j for j in json.loads(mam("job", "list", "--json", check=True).stdout) if j["state"] == "pending"]


def test_job_wait_draws_the_live_line_delegate_draws(wired):
    create_demo("dev-1")
    job = detached("demo-sleep: 3")
    code, out, screen = on_a_terminal("job", "wait", job)
    assert code == 0, screen
    lines = drawn(screen)
    assert any(p.startswith(f"{job} running") and "timeout in" in p for p in lines), screen
    # the last event as delegate's line has it (the started event, a heartbeat or a progress)
    assert any(" · last: " in p and " ago" in p for p in lines), screen
    assert screen.endswith(CLEAR)
    assert out.startswith("worked")


def test_a_job_behind_a_busy_session_names_the_job_ahead(wired):
    create_demo("dev-1")
    ahead = detached("demo-sleep: 4")
    behind = spawn_mam("job", "delegate", "--target", "dev-1", "--brief", "demo-write: b.txt :: b", *SHORT, "--quiet")
    try:
        pending = wait_for(open_jobs, timeout=30, message="the second job never appeared")
        code, _out, screen = on_a_terminal("job", "wait", pending[0]["id"], "--timeout", "1")
        waits = f"waiting for {ahead} (running) on session dev-1"
        assert any(p.startswith(f"{pending[0]['id']} pending") and waits in p for p in drawn(screen)), screen
        code, _out, screen = on_a_terminal(
            "job", "delegate", "--target", "dev-1", "--brief", "demo-write: c.txt :: c", *SHORT
        )
        assert code == 0, screen
        assert any(" pending · waiting for " in p and "on session dev-1" in p for p in drawn(screen)), screen
    finally:
        behind.wait(timeout=60)


def test_a_held_job_names_the_hold_who_placed_it_and_how_to_release_it(wired):
    create_demo("dev-1")
    mam("pause", "--all", "--by", "ops", check=True)
    try:
        code, _out, screen = on_a_terminal(
            "job", "delegate", "--target", "dev-1", "--brief", "demo-write: h.txt :: h", *SHORT, "--dispatch-wait", "2"
        )
    finally:
        mam("resume", "--all", check=True)
    assert code != 0, screen
    queued = [p for p in drawn(screen) if " queued · " in p]
    assert queued, screen
    assert all("held by ops since " in p and "mam resume --all" in p for p in queued), screen


def test_ctrl_c_clears_the_live_line_before_saying_the_job_runs_on(wired):
    create_demo("dev-1")
    job = detached("demo-sleep: 6")
    term = Terminal(50, 200)
    proc = subprocess.Popen(
        [MAM, "job", "wait", job], stdout=subprocess.PIPE, stderr=term.slave, stdin=subprocess.DEVNULL,
        preexec_fn=default_signals,
    )  # fmt: skip
    term.handed()
    try:
        wait_for(lambda: f"{job} running".encode() in term.seen, timeout=30, message="no live line")
        proc.send_signal(signal.SIGINT)
        code = proc.wait(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        seen = term.close(timeout=10)
    screen = seen.decode("utf-8", "replace")
    assert code == 130, screen
    said = f"job {job} is still running; follow it with: mam job wait {job}"
    before, found, _after = screen.partition(said)
    assert found, screen
    assert before.endswith(CLEAR), screen  # the live line cleared, the line on a line of its own
    mam("job", "wait", job, check=True)
