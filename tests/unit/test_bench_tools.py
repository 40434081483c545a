"""Smoke tests of the measuring instruments bench/vs_cao.py relies on (no CAO, no broker, < 5 s).

- bench/_cpu.py counts a whole process tree, including a grandchild that a daemon-style double
  fork orphaned (the checking process is made its subreaper, as vs_cao.py makes itself);
- bench/cao_mock_agent.py answers as CAO's mock_cli provider expects: a banner, the `❯ ` prompt,
  `> MOCK: <line>` per line (bracketed-paste markers stripped), goodbye on /exit.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parents[2] / "bench"

BURN = """
import os, sys, time
def burn(s):
    end = time.process_time() + s
    while time.process_time() < end:
        pass
if os.fork() == 0:  # the intermediate child leaves at once: its child is an orphan
    if os.fork() == 0:
        burn(0.3)
        os._exit(0)
    os._exit(0)
os.wait()
burn(0.2)
sys.stdin.read()  # alive until told: the tree's CPU is read while it lives
"""

# Run in a child interpreter: a subreaper adopts every orphan below it, which must not happen to
# the pytest worker (its tests' daemons would linger as zombies that look alive).
CHECK = """
import subprocess, sys, time
from bench import _cpu as cpu
assert cpu.become_subreaper()
before = cpu.snapshot()
proc = subprocess.Popen([sys.executable, "-c", sys.argv[1]], stdin=subprocess.PIPE)
deadline = time.monotonic() + 20
while True:  # until the orphan has burnt its 0.3 s and exited (a zombie we adopted), the parent its 0.2 s
    after = cpu.snapshot()
    zombies = cpu.orphan_zombies(after, keep=[proc.pid])
    total = cpu.tree_cpu(before, after, [proc.pid, *zombies])
    if zombies and total >= 0.45 or time.monotonic() > deadline:
        break
    time.sleep(0.02)
reaped = cpu.reap_orphans(keep=[proc.pid])
proc.communicate(b"", timeout=10)
print(len(zombies), round(total, 2), reaped)
"""


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")
def test_a_tree_is_counted_with_its_orphaned_grandchild() -> None:
    done = subprocess.run(
        [sys.executable, "-c", CHECK, BURN], capture_output=True, text=True, timeout=60, cwd=BENCH.parent
    )
    assert done.returncode == 0, done.stderr
    zombies, total, reaped = done.stdout.split()
    assert int(zombies) == 1, "the orphan was not adopted"
    assert 0.45 <= float(total) < 2.0
    assert int(reaped) == 1


def test_the_mock_agent_answers_like_cao_mock_cli() -> None:
    done = subprocess.run(
        [sys.executable, str(BENCH / "cao_mock_agent.py"), "--delay-ms", "1", "--ignored-flag"],
        input="\x1b[200~hello there\x1b[201~\n\n/exit\nnever read\n",
        capture_output=True,
        text=True,
        timeout=10,
    )
    assert done.returncode == 0
    assert done.stdout == "MockCli ready.\n\u276f > MOCK: hello there\n\u276f \u276f goodbye\n"


def test_vs_cao_refuses_to_compare_two_sides_on_different_interpreters(tmp_path: Path) -> None:
    """Both sides run on one interpreter (--python): a CAO venv another interpreter made is refused, saying
    how to make a matching one; a venv made by the same interpreter passes and the run names it."""
    sys.path.insert(0, str(BENCH.parent))
    try:
        from bench import vs_cao
    finally:
        sys.path.remove(str(BENCH.parent))
    real = os.path.realpath(sys.executable)
    other = tmp_path / "other"
    (other / "bin").mkdir(parents=True)
    (other / "bin" / "python").write_text("#!/bin/sh\necho /nowhere/python3.99; echo 3.99.0\n", encoding="utf-8")
    (other / "bin" / "python").chmod(0o755)  # says it is another interpreter, as a venv's python would
    same = tmp_path / "same"
    (same / "bin").mkdir(parents=True)
    (same / "bin" / "python").symlink_to(real)  # as a venv made by this interpreter links it

    args = argparse.Namespace(install="user", python=sys.executable, cao_venv=other, only=None)
    problem = vs_cao.same_interpreter(args)
    assert problem is not None and "/nowhere/python3.99" in problem and real in problem, problem
    assert "--cao-venv" in problem
    args = argparse.Namespace(install="user", python=sys.executable, cao_venv=same, only=None)
    assert vs_cao.same_interpreter(args) is None
    assert args.interpreter.endswith(f"({real})"), args.interpreter
    args = argparse.Namespace(install="user", python=str(tmp_path / "no-python"), cao_venv=same, only=None)
    assert "not an interpreter" in (vs_cao.same_interpreter(args) or "")
