"""Ctrl-C ends every long-running command with exit 130 (the exit table's `interrupted`): `mam tail`,
`mam board watch`, `mam monitor`, `mam node` in the foreground and `mam top` (where Ctrl-C is a key of its
raw terminal); each is interrupted once it runs (what it says when ready, polled with a deadline)."""

from __future__ import annotations

import signal
import subprocess
import threading
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from mam.util.poll import wait_for
from tests.helpers.jobs import FAST
from tests.helpers.mamcli import MAM, default_signals
from tests.helpers.terminal import Terminal


@pytest.fixture
def wired(workspace, amqtt_broker, monkeypatch):
    for key, value in {**amqtt_broker.env(), **FAST}.items():
        monkeypatch.setenv(key, value)
    return workspace


def interrupted_once(args: list[str], ready: Callable[[str], bool], timeout: float = 60) -> tuple[int, str]:
    """Start `mam args`, send SIGINT the moment `ready(its stderr so far)` holds (from the thread reading it: a
    command must be ready for Ctrl-C once it says so): (exit code, stderr)."""
    proc = subprocess.Popen(
        [MAM, *args], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, stdin=subprocess.DEVNULL, text=True,
        preexec_fn=default_signals,
    )  # fmt: skip
    assert proc.stderr is not None
    said: list[str] = []
    sent = threading.Event()
    once = threading.Lock()

    def interrupt_if_ready() -> None:
        with once:
            if not sent.is_set() and ready("".join(said)):
                proc.send_signal(signal.SIGINT)
                sent.set()

    def read() -> None:
        assert proc.stderr is not None
        for line in iter(proc.stderr.readline, ""):
            said.append(line)
            interrupt_if_ready()

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    try:
        deadline = time.monotonic() + timeout
        while not sent.wait(0.05):
            interrupt_if_ready()  # a readiness the output does not show (a pid file)
            assert proc.poll() is None or sent.is_set(), f"mam {' '.join(args)} ended first: {''.join(said)}"
            assert time.monotonic() < deadline, f"mam {' '.join(args)} never got ready: {''.join(said)}"
        code = proc.wait(timeout=timeout)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        reader.join(timeout=10)
    return code, "".join(said)


def test_tail_exits_130(workspace):
    # No broker configured: it says so and follows the registry (it is running).
    code, said = interrupted_once(["tail"], lambda s: "following the registry" in s)
    assert code == 130, said


def test_board_watch_exits_130(wired):
    code, said = interrupted_once(["board", "watch"], lambda s: "watching" in s)
    assert code == 130, said
    assert "aborted" not in said, said  # as `mam tail`: no line of its own (seen in the README walk)


def test_monitor_exits_130(wired):
    pidfile = Path(wired.run_dir) / "monitor.pid"
    code, said = interrupted_once(["monitor"], lambda _s: pidfile.exists())
    assert code == 130, said


def test_a_foreground_node_exits_130(wired):
    code, said = interrupted_once(["node"], lambda s: "serving workspace" in s)
    assert code == 130, said


def test_top_exits_130_on_ctrl_c(wired):
    term = Terminal(40, 120)
    proc = subprocess.Popen(
        [MAM, "top"], stdin=term.slave, stdout=term.slave, stderr=term.slave, start_new_session=True
    )
    term.handed()
    try:

        def drawn() -> bool:
            assert proc.poll() is None, term.seen[-2000:]  # top ended before it drew its table
            return b"SESSIONS" in term.seen

        wait_for(drawn, timeout=60, message=lambda: f"top drew no table: {term.seen[-2000:]!r}")
        term.type(b"\x03")
        code = proc.wait(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        term.close(timeout=10)
    assert code == 130
