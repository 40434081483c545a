"""mam/util/flock.py: an exclusive lock between processes (flock(2)), with a time limit, freed when its holder
dies; an instance taken twice counts its holds."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from mam.util.flock import FileLock, LockTimeout
from mam.util.poll import wait_for

HOLD = """
import sys
from mam.util.flock import FileLock
with FileLock(sys.argv[1]):
    print("held", flush=True)
    sys.stdin.read()  # held until the test ends it
"""


def holder(path: Path) -> subprocess.Popen[str]:
    proc = subprocess.Popen(
        [sys.executable, "-c", HOLD, str(path)], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    )
    assert proc.stdout is not None and proc.stdout.readline() == "held\n"
    return proc


def blocked(pid: int) -> bool:
    """Whether `pid` waits on a flock: the kernel lists a waiter in /proc/locks with `->`."""
    with open("/proc/locks") as f:
        return any("->" in line and " FLOCK " in line and f" {pid} " in line for line in f)


def test_another_process_holding_it_times_a_try_out_and_its_death_frees_it(tmp_path: Path) -> None:
    path = tmp_path / "x.lock"
    proc = holder(path)
    try:
        lock = FileLock(str(path), timeout=0.3)
        started = time.monotonic()
        with pytest.raises(LockTimeout):
            lock.acquire()
        assert time.monotonic() - started >= 0.3
        with pytest.raises(LockTimeout):
            lock.acquire(timeout=0)
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait()
    with FileLock(str(path), timeout=5):  # the kernel freed it with its holder
        with pytest.raises(LockTimeout):
            FileLock(str(path)).acquire(timeout=0)
    assert oct(path.stat().st_mode & 0o777) == oct(0o600)


def test_a_wait_without_a_limit_ends_when_the_holder_lets_go(tmp_path: Path) -> None:
    path = tmp_path / "x.lock"
    proc = holder(path)
    try:
        waiter = subprocess.Popen(
            [sys.executable, "-c", "import sys\nfrom mam.util.flock import FileLock\nFileLock(sys.argv[1]).acquire()\n"
             "print('got it')", str(path)],
            stdout=subprocess.PIPE, text=True,
        )  # fmt: skip
        wait_for(lambda: blocked(waiter.pid), timeout=30, message="the waiter never waited on the lock")
        assert waiter.poll() is None
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait()
    out, _ = waiter.communicate(timeout=30)
    assert out == "got it\n"


def test_two_instances_in_one_process_exclude_each_other_and_one_instance_counts_its_holds(tmp_path: Path) -> None:
    path = str(tmp_path / "x.lock")
    first = FileLock(path)
    with first:
        with first:  # taken twice: held until both holds are given back
            pass
        with pytest.raises(LockTimeout):
            FileLock(path).acquire(timeout=0)
    FileLock(path).acquire(timeout=0).release()  # given back
    fds = len(os.listdir("/proc/self/fd"))
    with FileLock(path, timeout=0):
        pass
    wait_for(lambda: len(os.listdir("/proc/self/fd")) == fds, timeout=5, message="the lock's descriptor stayed open")
