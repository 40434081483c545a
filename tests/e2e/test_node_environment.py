"""Issue 38, item 2: the node's environment is the workspace's, not its first caller's.

A program looked up on a PATH that begins with `.` is the one in the working folder. The node, started
by whichever caller comes first, serves every later caller: it works in the workspace's folder with a
PATH of absolute folders only, and finds tmux (and git, herdr) there by absolute path.

Real CLI, real tmux, a real broker, the demo agent and the node autostarted by the first delegation.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from mam.util.poll import wait_for
from mam.util.proc import pid_alive
from mam.workspace import Workspace
from tests.helpers.jobs import FAST, create_demo
from tests.helpers.mamcli import MAM, mam


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
