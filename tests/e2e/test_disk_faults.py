"""A full disk and a read-only `.mam/` give one clear line, never a traceback (issue 12, item 8).

The workspace lives on a small tmpfs this test mounts (root only; skipped elsewhere), so the
disk really fills: no error is injected.
"""

from __future__ import annotations

import errno
import json
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from mam.jobs.record import read_record
from mam.store.registry import Registry
from mam.util.poll import wait_for
from mam.workspace import Workspace
from tests.helpers.jobs import FAST, create_demo
from tests.helpers.mamcli import mam, spawn_mam


def _mount(*args: str) -> bool:
    return subprocess.run(["mount", *args], capture_output=True).returncode == 0


@pytest.fixture
def small_disk(workspace: Workspace) -> Iterator[Workspace]:
    """The workspace on its own 4 MiB tmpfs, unmounted (lazily: a pane may still sit in it) at the end."""
    if not _mount("-t", "tmpfs", "-o", "size=4m,mode=0700", "tmpfs", str(workspace.root)):
        pytest.skip("cannot mount a tmpfs here (needs root)")
    yield workspace
    subprocess.run(["umount", "-l", str(workspace.root)], capture_output=True)


def fill(folder: Path) -> Path:
    """Write zeros until the filesystem is full; the filler file is returned so it can be removed."""
    filler = folder / "filler"
    with open(filler, "wb", buffering=0) as f:  # unbuffered: nothing is left to flush (and fail) on close
        try:
            while True:
                f.write(b"\0" * 65536)
        except OSError as e:
            assert e.errno == errno.ENOSPC
    return filler


def one_line_error(stderr: str) -> str:
    lines = [line for line in stderr.splitlines() if line.strip() and not line.startswith("mam: WARNING")]
    assert "Traceback" not in stderr, stderr
    assert lines and lines[-1].startswith(("mam: error: ", "job ")), stderr
    return "\n".join(lines)


def test_a_full_disk_mid_job_says_disk_full_and_the_monitor_closes_the_job_later(
    small_disk: Workspace, amqtt_broker, monkeypatch: pytest.MonkeyPatch
):
    ws = small_disk
    for key, value in {**amqtt_broker.env(), **FAST}.items():
        monkeypatch.setenv(key, value)
    create_demo("dev-1", behaviour="never_start")
    job_id = "job-diskfull1"
    wrapper = spawn_mam(
        "job", "delegate", "--target", "tmux:dev-1", "--brief", "hi", "--job-id", job_id, "--start-deadline", "6"
    )
    try:
        wait_for(
            lambda: ws.job_record(job_id).exists() and read_record(ws, job_id).get("state") == "delivered",
            timeout=30,
            message="the brief was never delivered",
        )
        filler = fill(ws.root)
        _, err = wrapper.communicate(timeout=90)
    finally:
        if wrapper.poll() is None:
            wrapper.kill()
            wrapper.communicate()
    assert wrapper.returncode != 0
    assert "disk full" in one_line_error(err)

    filler.unlink()

    # Space is back: the monitor closes whatever the wrapper could not (the start deadline has passed).
    def closed() -> bool:
        mam("monitor", "--once", check=True)
        view = json.loads(mam("job", "status", job_id, "--json", check=True).stdout)
        return view["state"] in ("failed", "timed_out", "cancelled")

    wait_for(closed, timeout=60, interval=0.5, message="the job was never closed")


def test_a_full_disk_before_a_job_is_one_line_and_leaves_no_open_job(
    small_disk: Workspace, monkeypatch: pytest.MonkeyPatch
):
    ws = small_disk
    monkeypatch.setenv("MAM_NO_AUTOSTART", "1")
    Registry(ws).close()
    filler = fill(ws.root)
    proc = mam("job", "delegate", "--target", "tmux:dev-1", "--brief", "hi")
    assert proc.returncode == 1
    assert "disk full" in one_line_error(proc.stderr)
    filler.unlink()
    assert json.loads(mam("job", "list", "--json", check=True).stdout) == []


def test_a_read_only_state_folder_is_one_line(small_disk: Workspace, monkeypatch: pytest.MonkeyPatch):
    ws = small_disk
    monkeypatch.setenv("MAM_NO_AUTOSTART", "1")
    Registry(ws).close()
    state = str(ws.state)
    if not (_mount("--bind", state, state) and _mount("-o", "remount,bind,ro", state)):
        pytest.skip("cannot remount read-only here")
    try:
        proc = mam("job", "delegate", "--target", "tmux:dev-1", "--brief", "hi")
        assert proc.returncode == 1
        assert "read-only" in one_line_error(proc.stderr)
        code = mam("doctor", "--json")
        checks = {c["name"]: c for c in json.loads(code.stdout)["checks"]}
        assert code.returncode == 1 and checks["state folder"]["status"] == "fail"
    finally:
        subprocess.run(["umount", state], capture_output=True)
