"""mam acts only on files its own user owns and nobody else can write (issue 12, item 7).

Each test plants what another local user could plant (files owned by uid 65534, `nobody`,
or writable by group/others) and runs the real `mam` CLI. Changing a file's owner, or running a
process as another user, needs root: those tests are skipped elsewhere.
"""

from __future__ import annotations

import json
import os
import stat
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from mam.util.poll import wait_for
from mam.util.proc import pid_alive, start_time
from tests.helpers.mamcli import MAM, mam

OTHER = 65534  # nobody
needs_root = pytest.mark.skipif(os.geteuid() != 0, reason="needs root to create files or processes of another user")


def run_in(cwd: Path, *args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [MAM, *args], cwd=cwd, env={**os.environ, **(env or {})}, capture_output=True, text=True, timeout=60
    )


def evil_program(folder: Path) -> tuple[Path, Path]:
    """An executable that proves it ran by writing a marker file."""
    marker = folder / "evil-ran"
    program = folder / "evil"
    program.write_text(f"#!/bin/sh\necho ran > {marker}\n")
    program.chmod(0o755)
    return program, marker


@needs_root
def test_a_planted_env_file_in_a_parent_folder_is_refused_and_its_program_never_runs(tmp_path: Path):
    # Another user drops a .mam.env in a shared folder above the one the victim works in (like /tmp).
    shared = tmp_path / "shared"
    work = shared / "victim" / "project"
    work.mkdir(parents=True)
    program, marker = evil_program(shared)
    planted = shared / ".mam.env"
    planted.write_text(f"AGENT_PYTHON_BIN={program}\nMAM_NO_AUTOSTART=0\n")
    os.chown(planted, OTHER, OTHER)

    proc = run_in(work, "broker", "start")

    assert proc.returncode == 2, proc.stderr
    assert str(planted) in proc.stderr and "nobody" in proc.stderr and f"uid {OTHER}" in proc.stderr
    assert "Traceback" not in proc.stderr
    assert not marker.exists(), "the planted settings file ran its program"
    assert not (shared / ".mam").exists()


def test_an_env_file_others_may_write_is_refused_naming_its_mode(tmp_path: Path):
    ws = tmp_path / "ws"
    ws.mkdir()
    env_file = ws / ".mam.env"
    env_file.write_text("MAM_LOG_LEVEL=INFO\n")
    env_file.chmod(0o666)
    proc = mam("--workspace", str(ws), "config")
    assert proc.returncode == 2
    assert str(env_file) in proc.stderr and "0666" in proc.stderr and "chmod go-w" in proc.stderr
    env_file.chmod(0o644)
    assert mam("--workspace", str(ws), "config").returncode == 0


@needs_root
def test_an_explicit_env_file_of_another_user_is_refused(tmp_path: Path):
    env_file = tmp_path / "other.env"
    env_file.write_text("MAM_LOG_LEVEL=INFO\n")
    os.chown(env_file, OTHER, OTHER)
    proc = mam("--workspace", str(tmp_path), "--env-file", str(env_file), "config")
    assert proc.returncode == 2 and str(env_file) in proc.stderr and "nobody" in proc.stderr


@needs_root
def test_a_symlinked_env_file_pointing_at_another_users_file_is_refused(tmp_path: Path):
    ws = tmp_path / "ws"
    ws.mkdir()
    target = tmp_path / "theirs.env"
    target.write_text("MAM_LOG_LEVEL=INFO\n")
    os.chown(target, OTHER, OTHER)
    (ws / ".mam.env").symlink_to(target)
    proc = mam("--workspace", str(ws), "config")
    assert proc.returncode == 2 and "nobody" in proc.stderr


@pytest.mark.parametrize("planted", [pytest.param("owner", marks=needs_root), "mode"])
def test_a_state_folder_of_another_user_or_writable_by_others_is_refused(tmp_path: Path, planted: str):
    ws = tmp_path / "ws"
    state = ws / ".mam"
    state.mkdir(parents=True)
    if planted == "owner":
        os.chown(state, OTHER, OTHER)
    else:
        state.chmod(0o777)
    proc = mam("--workspace", str(ws), "session", "status")
    assert proc.returncode == 2, proc.stderr
    assert str(state) in proc.stderr
    assert ("nobody" in proc.stderr) if planted == "owner" else ("0777" in proc.stderr)
    assert list(state.iterdir()) == [], "mam wrote into a state folder it does not trust"


@needs_root
def test_the_lookup_from_a_subfolder_refuses_a_foreign_state_folder_above(tmp_path: Path):
    state = tmp_path / ".mam"
    state.mkdir()
    os.chown(state, OTHER, OTHER)
    below = tmp_path / "a" / "b"
    below.mkdir(parents=True)
    proc = run_in(below, "job", "list")
    assert proc.returncode == 2 and str(state) in proc.stderr


def test_a_readable_state_folder_is_tightened_to_0700_and_a_new_one_is_created_so(tmp_path: Path):
    ws = tmp_path / "ws"
    (ws / ".mam").mkdir(parents=True)
    (ws / ".mam").chmod(0o755)
    assert mam("--workspace", str(ws), "job", "list").returncode == 0
    assert stat.S_IMODE((ws / ".mam").stat().st_mode) == 0o700

    fresh = tmp_path / "fresh"
    fresh.mkdir()
    old = os.umask(0o022)
    try:
        assert mam("--workspace", str(fresh), "doctor").returncode == 0
        from mam.store.registry import Registry
        from mam.workspace import Workspace

        Registry(Workspace(fresh)).close()
    finally:
        os.umask(old)
    assert stat.S_IMODE((fresh / ".mam").stat().st_mode) == 0o700


@pytest.fixture
def foreign_process() -> Iterator[subprocess.Popen[bytes]]:
    """A process of user nobody whose command line looks like mam's broker."""
    child = subprocess.Popen(
        ["/bin/sh", "-c", "read line", "python", "-m", "mam.broker.serve"],
        stdin=subprocess.PIPE,
        user=OTHER,
        group=OTHER,
        cwd="/",
    )
    wait_for(lambda: start_time(child.pid) is not None, timeout=10, message="the foreign process did not start")
    yield child
    child.kill()
    child.wait(10)


@needs_root
def test_a_broker_pid_file_naming_another_users_process_is_refused_and_never_signalled(tmp_path: Path, foreign_process):
    ws = tmp_path / "ws"
    broker_dir = ws / ".mam" / "broker"
    broker_dir.mkdir(parents=True, mode=0o700)
    (ws / ".mam").chmod(0o700)
    pid = foreign_process.pid
    state = broker_dir / "broker.json"
    state.write_text(json.dumps({"pid": pid, "pid_start": start_time(pid), "port": 1}))
    state.chmod(0o600)

    status = mam("--workspace", str(ws), "broker", "status", "--json")
    assert status.returncode == 2, status.stdout + status.stderr
    assert str(state) in status.stderr and str(pid) in status.stderr and "nobody" in status.stderr

    stop = mam("--workspace", str(ws), "broker", "stop")
    assert stop.returncode == 2
    assert foreign_process.poll() is None and pid_alive(pid), "mam signalled another user's process"

    doctor = mam("--workspace", str(ws), "doctor", "--json")
    broker = next(c for c in json.loads(doctor.stdout)["checks"] if c["name"] == "broker")
    assert doctor.returncode == 1 and broker["status"] == "fail" and str(pid) in broker["detail"]


def hook_links(ws: Path, session: str, victims: Path) -> dict[str, Path]:
    """`.mam/sessions/<session>/activity.json` and `hook-errors.log` as links to files outside it."""
    folder = ws / ".mam" / "sessions" / session
    folder.mkdir(parents=True)
    links = {}
    for name in ("activity.json", "hook-errors.log"):
        victim = victims / f"victim-{name}"
        victim.write_text("the victim's own text\n")
        (folder / name).symlink_to(victim)
        links[name] = victim
    return links


def hook_call(ws: Path, session: str, payload: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [MAM, "hook", "claude", "--session", session, "--workspace", str(ws)],
        input=payload,
        env={k: v for k, v in os.environ.items() if k != "MAM_WORKSPACE"},
        capture_output=True,
        text=True,
        timeout=60,
    )


@needs_root
def test_mam_hook_writes_nothing_into_another_users_workspace(tmp_path: Path):
    """Issue 25, item 5: `mam hook` skipped the ownership check and wrote through links in another user's `.mam/`."""
    ws = tmp_path / "theirs"
    victims = tmp_path / "victims"
    victims.mkdir()
    links = hook_links(ws, "s", victims)
    for path in [ws / ".mam", *(ws / ".mam").rglob("*")]:
        os.lchown(path, OTHER, OTHER)
    before = sorted((str(p), os.readlink(p) if p.is_symlink() else "") for p in (ws / ".mam").rglob("*"))

    for payload in ('{"hook_event_name": "UserPromptSubmit", "session_id": "x"}', "{not json"):
        proc = hook_call(ws, "s", payload)
        assert (proc.returncode, proc.stdout) == (0, ""), proc.stderr

    after = sorted((str(p), os.readlink(p) if p.is_symlink() else "") for p in (ws / ".mam").rglob("*"))
    assert after == before, "mam hook wrote into another user's .mam/"
    assert all(v.read_text() == "the victim's own text\n" for v in links.values())


def test_mam_hook_never_writes_through_a_link_in_its_own_workspace(tmp_path: Path):
    """Issue 25, item 5: the hook's files are opened with O_NOFOLLOW (a link is not followed)."""
    ws = tmp_path / "mine"
    victims = tmp_path / "victims"
    victims.mkdir()
    (ws / ".mam").mkdir(parents=True, mode=0o700)
    links = hook_links(ws, "s", victims)
    proc = hook_call(ws, "s", "{not json")  # an error: the hook logs it to hook-errors.log
    assert (proc.returncode, proc.stdout) == (0, ""), proc.stderr
    assert links["hook-errors.log"].read_text() == "the victim's own text\n"
    assert (ws / ".mam" / "sessions" / "s" / "hook-errors.log").is_symlink()
