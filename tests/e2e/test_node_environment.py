"""Issue 38, item 2: the node's environment is the workspace's, not its first caller's.

`tmux -L NAME` finds its server under `$TMUX_TMPDIR/tmux-UID/`, so a process with another TMUX_TMPDIR
does not see the same server, and a program looked up on a PATH that begins with `.` is the one in
the working folder. The node, started by whichever caller comes first, serves every later caller: a
session is reached by the socket its row recorded when its pane was made (`tmux -S PATH`), and the node
works in the workspace's folder with a PATH of absolute folders only, finding tmux and git there.

Real CLI, real tmux (each test's servers under temporary TMUX_TMPDIRs it removes), a real broker, the
demo agent and the node autostarted by the first delegation.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from mam.util.poll import wait_for
from mam.util.proc import pid_alive
from mam.workspace import Workspace
from tests.helpers.jobs import FAST, create_demo
from tests.helpers.mamcli import MAM, mam

TMUX = shutil.which("tmux") or "tmux"


@pytest.fixture
def wired(workspace: Workspace, amqtt_broker, monkeypatch: pytest.MonkeyPatch) -> Iterator[Workspace]:
    """The workspace on the embedded-broker fixture, with fast timings; its node stopped afterwards."""
    for key, value in {**amqtt_broker.env(), **FAST}.items():
        monkeypatch.setenv(key, value)
    try:
        yield workspace
    finally:
        mam("node", "stop", timeout=60)
        pid = node_pid(workspace)
        if pid:  # it did not stop: end the process this test started, by its pid
            os.kill(pid, 9)


@pytest.fixture
def new_tmux_tmpdir() -> Iterator[Callable[[], Path]]:
    """Makes fresh TMUX_TMPDIRs (short paths: a socket path has at most 107 bytes); every tmux server
    under one is killed by its socket, and the folders removed, afterwards."""
    made: list[Path] = []

    def new() -> Path:
        made.append(Path(tempfile.mkdtemp(prefix="mam-tt-", dir="/tmp")))
        return made[-1]

    yield new
    for folder in made:
        kill_servers_under(folder)
        shutil.rmtree(folder, ignore_errors=True)


def kill_servers_under(tmpdir: Path) -> None:
    for sock in sorted((tmpdir / f"tmux-{os.getuid()}").glob("*")):
        subprocess.run([TMUX, "-S", str(sock), "kill-server"], capture_output=True, timeout=30)


def node_pid(ws: Workspace) -> int:
    run = ws.state / "run"
    try:
        pid = int(json.loads((run / "node.json").read_text())["pid"])
    except (OSError, ValueError, KeyError):
        return 0
    return pid if pid_alive(pid) and (run / "node.sock").exists() else 0


def environ_of(pid: int) -> dict[str, str]:
    with open(f"/proc/{pid}/environ", "rb") as f:
        items = [item.decode("utf-8", "replace").partition("=") for item in f.read().split(b"\0") if item]
    return {k: v for k, _, v in items}


def owner_pid(ws: Workspace, job_id: str) -> int:
    record = json.loads(ws.job_record(job_id).read_text())
    return int(str(record["owner"]).split(":")[1])


def delegate(
    brief: str, *, env: dict[str, str] | None = None, cwd: Path | None = None, drop: tuple[str, ...] = ()
) -> dict[str, object]:
    """`mam job delegate --target s` as a caller with `env` over this one's (without `drop`), in `cwd`."""
    full = {k: v for k, v in {**os.environ, **(env or {})}.items() if k not in drop}
    proc = subprocess.run(
        [MAM, "job", "delegate", "--target", "s", "--brief", brief, "--json", "--start-deadline", "30"],
        env=full,
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, f"exit {proc.returncode}\n{proc.stdout}\n{proc.stderr}"
    done = json.loads(proc.stdout)
    assert done["state"] == "completed", done
    return dict(done)


def test_mam_demo_with_a_tmux_tmpdir_of_its_own_ends_every_job_as_expected(
    tmp_path: Path, new_tmux_tmpdir: Callable[[], Path]
) -> None:
    """The demo makes its sessions in its own process and hands the loop's jobs to a node started
    without its TMUX_TMPDIR: the node reaches the sessions' server by the sockets their rows recorded."""
    tmpdir = new_tmux_tmpdir()
    proc = subprocess.run(
        [MAM, "demo"],
        env={**os.environ, "TMUX_TMPDIR": str(tmpdir)},
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, f"{proc.stdout}\n{proc.stderr}"
    assert "every job ended as expected" in proc.stdout, proc.stdout
    assert "target_not_found" not in proc.stdout


def test_a_session_takes_jobs_from_callers_of_any_tmux_tmpdir_through_the_node(
    wired: Workspace, new_tmux_tmpdir: Callable[[], Path]
) -> None:
    made_in, starter, other = new_tmux_tmpdir(), new_tmux_tmpdir(), new_tmux_tmpdir()
    s = create_demo("s", env={"TMUX_TMPDIR": str(made_in)})
    sock = made_in / f"tmux-{os.getuid()}" / os.environ["MAM_TMUX_SERVER"]
    assert sock.exists()

    # The first delegation starts the node, from a caller whose TMUX_TMPDIR names no server at all.
    first = delegate("demo-write: one.txt :: from the node's starter", env={"TMUX_TMPDIR": str(starter)})
    pid = wait_for(lambda: node_pid(wired), timeout=30, message="no node started")
    assert environ_of(pid).get("TMUX_TMPDIR") == str(starter)  # the scene this test is about
    second = delegate("demo-write: two.txt :: from another TMUX_TMPDIR", env={"TMUX_TMPDIR": str(other)})
    third = delegate("demo-write: three.txt :: from a caller with no TMUX_TMPDIR", drop=("TMUX_TMPDIR",))
    for job in (first, second, third):
        assert owner_pid(wired, str(job["id"])) == pid  # each ran in the node
    assert (wired.root / "one.txt").read_text() == "from the node's starter\n"
    assert (wired.root / "three.txt").read_text() == "from a caller with no TMUX_TMPDIR\n"

    # Looking from yet another TMUX_TMPDIR sees the same live pane, by the recorded socket.
    looked = mam("session", "status", "--json", env={"TMUX_TMPDIR": str(other)}, check=True)
    row = next(r for r in json.loads(looked.stdout) if r["name"] == "s")
    assert row["server"] == os.environ["MAM_TMUX_SERVER"] and row["socket"] == str(sock), row
    assert row["pane_alive"] and row["drift"] == "" and row["pane_id"] == s["pane_id"], row
    # No server was ever started where the starter's or another caller's TMUX_TMPDIR points.
    assert not list(starter.glob("tmux-*/*")) and not list(other.glob("tmux-*/*"))


def test_a_tmux_planted_in_the_first_callers_folder_never_runs(wired: Workspace, tmp_path: Path) -> None:
    """The node is started by a caller whose PATH begins with `.` in a folder that holds an executable
    `tmux`: neither that caller's delegation nor any later one runs it, and the node works in the
    workspace's folder with absolute PATH entries only."""
    real = shutil.which("tmux")
    assert real is not None
    marker = tmp_path / "planted-tmux-ran"
    planted = tmp_path / "caller"
    planted.mkdir()
    for folder in (planted, wired.root):  # the caller's folder, and the one the node now works in
        script = folder / "tmux"
        script.write_text(f'#!/bin/sh\necho "$PWD $*" >> {marker}\nexec {real} "$@"\n')
        script.chmod(0o755)
    create_demo("s")
    dotted = {"PATH": f".{os.pathsep}{os.pathsep}{os.environ['PATH']}"}  # `.`, then an empty entry

    first = delegate("demo-write: one.txt :: from the planted folder", env=dotted, cwd=planted)
    pid = wait_for(lambda: node_pid(wired), timeout=30, message="no node started")
    assert owner_pid(wired, str(first["id"])) == pid
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    for env, cwd in ((dotted, planted), ({}, elsewhere), (dotted, wired.root)):
        done = delegate("demo-write: later.txt :: a later caller", env=env, cwd=cwd)
        assert owner_pid(wired, str(done["id"])) == pid
    assert (wired.root / "later.txt").read_text() == "a later caller\n"
    assert not marker.exists(), marker.read_text()
    assert os.readlink(f"/proc/{pid}/cwd") == str(wired.root)
    assert all(os.path.isabs(p) for p in environ_of(pid)["PATH"].split(os.pathsep)), environ_of(pid)["PATH"]
