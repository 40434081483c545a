"""The forkserver (mam/forkserver): `mam job delegate` served by a child of a warm per-workspace
process behaves as the fresh process it replaces: same output and exit codes, the caller's stdin,
signals passed on, killed with its caller; stale code, a foreign socket or MAM_FORKSERVER=0 make
the command run in its own process; the forkserver ends with the workspace's tmux server."""

from __future__ import annotations

import hashlib
import json
import os
import signal
import subprocess
import time
from pathlib import Path

import pytest

from mam.util.poll import wait_for
from mam.util.proc import pid_alive
from mam.workspace import Workspace
from tests.helpers.jobs import create_demo
from tests.helpers.mamcli import MAM, mam, spawn_mam

SHORT = ["--start-deadline", "10", "--heartbeat", "0.5"]


def server_pid(ws: Workspace) -> int:
    """The forkserver's pid (from its lock file) if it serves now (its socket is there), else 0."""
    run = ws.state / "run"
    try:
        pid = int((run / "forkserver.lock").read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return 0
    return pid if pid_alive(pid) and (run / "forkserver.sock").exists() else 0


def start_server(ws: Workspace) -> int:
    """Run one job through the full path (it starts the forkserver), then wait for it to serve."""
    create_demo("w")
    done = mam("job", "delegate", "--target", "w", "--brief", "warm up", "--json", *SHORT)
    assert done.returncode == 0, done.stderr
    return wait_for(lambda: server_pid(ws), timeout=30, message="no forkserver started")


def parent_of(pid: int) -> int:
    with open(f"/proc/{pid}/stat", "rb") as f:
        return int(f.read().rsplit(b")", 1)[1].split()[1])


def owner_pid(ws: Workspace, job_id: str) -> int:
    record = json.loads(ws.job_record(job_id).read_text())
    return int(str(record["owner"]).split(":")[1])


def open_job(ws: Workspace) -> str:
    from mam.store import jobs as jobs_table
    from mam.store.registry import Registry

    registry = Registry(ws)
    try:

        def running() -> str:
            with registry.read() as conn:
                rows = [r for r in jobs_table.open_jobs(conn) if r.state == "running"]
            return rows[0].id if rows else ""

        return wait_for(running, timeout=30, message="the job never ran")
    finally:
        registry.close()


def test_a_delegation_is_served_by_a_forkserver_child_with_the_same_result(wired):
    pid = start_server(wired)
    done = mam("job", "delegate", "--target", "w", "--brief", "demo-write: out.txt :: served", "--json", *SHORT)
    assert done.returncode == 0, done.stderr
    record = json.loads(done.stdout)
    assert record["state"] == "completed" and record["exit_code"] == 0
    assert (wired.root / "out.txt").read_text() == "served\n"
    log = (wired.state / "run" / "forkserver.log").read_text()
    assert f"forkserver[{pid}] serving" in log
    # The same command with the forkserver turned off gives the same kind of record.
    off = mam("job", "delegate", "--target", "w", "--brief", "x", "--json", *SHORT, env={"MAM_FORKSERVER": "0"})
    assert off.returncode == 0 and set(json.loads(off.stdout)) == set(record)


def test_the_wrapper_is_a_child_of_the_forkserver_and_owns_the_job(wired):
    pid = start_server(wired)
    create_demo("s", behaviour="silent_after_start")
    proc = spawn_mam("job", "delegate", "--target", "s", "--brief", "hold", "--heartbeat", "60", "--json")
    try:
        job = open_job(wired)
        wrapper = owner_pid(wired, job)
        assert wrapper != proc.pid and parent_of(wrapper) == pid
    finally:
        mam("job", "cancel", job)
        out, err = proc.communicate(timeout=30)
    assert proc.returncode == 5, err  # cancelled: exit 5, passed through the caller
    assert json.loads(out)["state"] == "cancelled"


def test_killing_the_caller_kills_its_wrapper(wired):
    start_server(wired)
    create_demo("s", behaviour="silent_after_start")
    proc = spawn_mam("job", "delegate", "--target", "s", "--brief", "hold", "--heartbeat", "60", "--json")
    job = open_job(wired)
    wrapper = owner_pid(wired, job)
    assert pid_alive(wrapper)
    proc.kill()
    proc.communicate(timeout=10)
    wait_for(lambda: not pid_alive(wrapper), timeout=10, message="the wrapper outlived its killed caller")


@pytest.mark.parametrize(("sig", "want"), [(signal.SIGTERM, 143), (signal.SIGINT, 130)])
def test_signals_reach_the_wrapper_and_the_caller_ends_as_it_did(wired, sig, want):
    start_server(wired)
    create_demo("s", behaviour="silent_after_start")
    proc = spawn_mam("job", "delegate", "--target", "s", "--brief", "hold", "--heartbeat", "60", "--json")
    job = open_job(wired)
    wrapper = owner_pid(wired, job)
    proc.send_signal(sig)
    try:
        _out, err = proc.communicate(timeout=30)
    except subprocess.TimeoutExpired:
        proc.kill()  # never left running behind a failed test
        proc.communicate()
        raise
    assert proc.returncode == want, err
    wait_for(lambda: not pid_alive(wrapper), timeout=10, message="the wrapper outlived the signal")


def test_stdin_and_usage_errors_pass_through(wired):
    start_server(wired)
    done = mam(
        "job", "delegate", "--target", "w", "--brief-file", "-", "--json", *SHORT, input="demo-write: in.txt :: piped"
    )
    assert done.returncode == 0, done.stderr
    assert (wired.root / "in.txt").read_text() == "piped\n"
    bad = mam("job", "delegate", "--target", "w", "--brief", "x", "--timeout", "nan")
    plain = mam("job", "delegate", "--target", "w", "--brief", "x", "--timeout", "nan", env={"MAM_FORKSERVER": "0"})
    assert bad.returncode == plain.returncode == 2
    assert bad.stderr == plain.stderr and bad.stdout == plain.stdout


def test_stdin_is_read_untranslated_as_a_fresh_process_reads_it(wired):
    start_server(wired)
    brief = "first line\r\nsecond\rthird\n"
    shas = []
    for env in ({}, {"MAM_FORKSERVER": "0"}):
        proc = subprocess.run(
            [MAM, "job", "delegate", "--target", "w", "--brief-file", "-", "--json", *SHORT],
            input=brief.encode(),
            capture_output=True,
            env={**os.environ, **env},
        )
        assert proc.returncode == 0, proc.stderr
        record = json.loads(wired.job_record(json.loads(proc.stdout)["id"]).read_text())
        shas.append(record.get("brief_sha256") or record.get("meta", {}).get("brief_sha256"))
    assert shas[0] == shas[1] == hashlib.sha256(brief.encode()).hexdigest()


def test_an_ignored_hangup_stays_ignored(wired):
    start_server(wired)
    create_demo("s", behaviour="silent_after_start")
    proc = subprocess.Popen(
        [MAM, "job", "delegate", "--target", "s", "--brief", "hold", "--heartbeat", "60", "--json"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        preexec_fn=lambda: signal.signal(signal.SIGHUP, signal.SIG_IGN),  # as nohup starts it
    )
    job = open_job(wired)
    wrapper = owner_pid(wired, job)
    proc.send_signal(signal.SIGHUP)
    mam("job", "status", job, check=True)  # a round trip of our own after the signal
    assert proc.poll() is None and pid_alive(wrapper)
    mam("job", "cancel", job)
    _out, err = proc.communicate(timeout=30)
    assert proc.returncode == 5, err


def loaded_module(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A module every interpreter of this test loads, the forkserver too (on a PYTHONPATH of its own):
    it stands for mam's code, whose files the tests running in parallel share."""
    extra = tmp_path / "extra"
    extra.mkdir()
    module = extra / "sitecustomize.py"
    module.write_text("")
    earlier = module.stat().st_mtime_ns - 10 * 1_000_000_000  # not written just now: a forkserver may start
    os.utime(module, ns=(earlier, earlier))
    monkeypatch.setenv("PYTHONPATH", str(extra))
    return module


def test_changed_code_is_never_served(wired, tmp_path, monkeypatch):
    module = loaded_module(tmp_path, monkeypatch)
    pid = start_server(wired)
    st = module.stat()
    os.utime(module, ns=(st.st_atime_ns, st.st_mtime_ns - 1_000_000))
    done = mam("job", "delegate", "--target", "w", "--brief", "after the change", "--json", *SHORT)
    assert done.returncode == 0, done.stderr
    log = wired.state / "run" / "forkserver.log"
    wait_for(
        lambda: not pid_alive(pid),
        timeout=10,
        message=lambda: f"a forkserver with stale code kept running; its log:\n{log.read_text()}",
    )
    assert "changed on disk" in log.read_text()


def test_code_written_while_it_loads_is_never_served(wired, tmp_path, monkeypatch):
    module = loaded_module(tmp_path, monkeypatch)
    later = time.time_ns() + 60 * 1_000_000_000
    os.utime(module, ns=(later, later))  # as if written after the forkserver began loading it
    create_demo("w")
    done = mam("job", "delegate", "--target", "w", "--brief", "x", "--json", *SHORT)
    assert done.returncode == 0, done.stderr
    log = wired.state / "run" / "forkserver.log"
    wait_for(
        lambda: log.exists() and "changed while it was loaded" in log.read_text(),
        timeout=30,
        message="a forkserver started on a module written while it loaded",
    )
    assert server_pid(wired) == 0
    again = mam("job", "delegate", "--target", "w", "--brief", "y", "--json", *SHORT)
    assert again.returncode == 0, again.stderr


@pytest.mark.parametrize("setting", [{"MAM_FORKSERVER": "0"}, {"MAM_NO_AUTOSTART": "1"}])
def test_turned_off_or_no_autostart_it_never_starts(wired, setting):
    create_demo("w")
    for _ in range(2):
        done = mam("job", "delegate", "--target", "w", "--brief", "x", "--json", *SHORT, env=setting)
        assert done.returncode == 0, done.stderr
    assert not (wired.state / "run" / "forkserver.lock").exists()
    assert server_pid(wired) == 0


def ran_where(*args: str, env: dict[str, str] | None = None) -> tuple[int, int]:
    """(the caller's pid, the pid that owned its job) for one delegation."""
    proc = spawn_mam("job", "delegate", *args, "--json", env=env)
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 0, err
    return proc.pid, owner_pid(Workspace(Path(os.environ["MAM_WORKSPACE"])), json.loads(out)["id"])


def test_a_served_job_is_owned_by_another_process_than_the_caller(wired):
    start_server(wired)
    caller, owner = ran_where("--target", "w", "--brief", "x", *SHORT)
    assert caller != owner


def test_a_socket_others_may_use_is_not_trusted(wired):
    start_server(wired)
    os.chmod(wired.state / "run" / "forkserver.sock", 0o666)
    caller, owner = ran_where("--target", "w", "--brief", "x", *SHORT)
    assert caller == owner  # it ran in the caller's own process


def test_it_ends_with_the_workspace_tmux_server(wired, tmux_server):
    pid = start_server(wired)
    subprocess.run(["tmux", "-L", tmux_server.name, "kill-server"], capture_output=True)
    wait_for(lambda: not pid_alive(pid), timeout=10, message="the forkserver outlived the tmux server")
    assert not (wired.state / "run" / "forkserver.sock").exists()


def test_it_ends_when_idle(wired, monkeypatch):
    monkeypatch.setenv("MAM_FORKSERVER_IDLE_S", "0.5")
    create_demo("w")
    done = mam("job", "delegate", "--target", "w", "--brief", "warm up", "--json", *SHORT)
    assert done.returncode == 0, done.stderr
    log = wired.state / "run" / "forkserver.log"
    # Its log, not a look at the process: it may serve and end between two looks of a busy machine.
    text = wait_for(
        lambda: log.exists() and "exiting:" in log.read_text() and log.read_text(),
        timeout=30,
        message=lambda: f"the forkserver did not end; its log:\n{log.read_text() if log.exists() else ''}",
    )
    assert "serving" in text and "exiting: idle for 0.5 s" in text, text
    pid = int(text.split("(pid ", 1)[1].split(")", 1)[0])
    wait_for(lambda: not pid_alive(pid), timeout=15, message="the forkserver said it was exiting but runs on")


def test_the_mam_script_needs_no_re():
    assert "import re" not in Path(MAM).read_text()


# -- issue 25, items 6-8: callers whose environment changes what runs, slow callers, malformed requests --
def test_a_forkserver_started_with_ld_preload_never_serves_a_caller_without_it(wired, monkeypatch):
    """Item 6: the first caller's LD_PRELOAD was applied to a clean caller's delegation."""
    monkeypatch.setenv("LD_PRELOAD", "libm.so.6")  # a real library, harmless: what matters is that it differs
    pid = start_server(wired)
    with open(f"/proc/{pid}/environ", "rb") as f:
        assert b"LD_PRELOAD=libm.so.6" in f.read().split(b"\0")
    caller, owner = ran_where("--target", "w", "--brief", "x", *SHORT)
    assert caller != owner  # the same LD_PRELOAD: served
    monkeypatch.delenv("LD_PRELOAD")
    for env in ({}, {"LD_LIBRARY_PATH": "/nonexistent"}, {"PYTHONPATH": "/nonexistent"}):
        caller, owner = ran_where("--target", "w", "--brief", "x", *SHORT, env=env)
        assert caller == owner, env  # another loader or interpreter environment: it ran in its own process
    assert server_pid(wired) == pid


def test_a_relative_pythonpath_is_never_served_nor_starts_a_forkserver(wired, tmp_path):
    """Item 6: `PYTHONPATH=.` matched as a string, and ran another folder's sitecustomize.py."""
    create_demo("w")
    ran = tmp_path / "sitecustomize-ran"
    folders = []
    for name in ("a", "b"):
        folder = tmp_path / name
        folder.mkdir()
        (folder / "sitecustomize.py").write_text(f"open({str(ran)!r}, 'a').write({name!r} + '\\n')\n")
        folders.append(folder)
    for folder in (*folders, folders[0]):
        proc = subprocess.Popen(
            [MAM, "job", "delegate", "--target", "w", "--brief", "x", "--json", *SHORT],
            cwd=folder,
            env={**os.environ, "PYTHONPATH": "."},
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        out, err = proc.communicate(timeout=60)
        assert proc.returncode == 0, err
        assert owner_pid(wired, json.loads(out)["id"]) == proc.pid  # it ran in the caller's own process
    assert ran.read_text().split() == ["a", "b", "a"]  # each caller's own folder, once each: no server loaded one
    assert not (wired.state / "run" / "forkserver.lock").exists() and server_pid(wired) == 0


def test_a_slow_caller_stalls_no_other_delegation_and_is_dropped(wired):
    """Item 7: one same-user connection that trickles a request never finished stalled every delegation."""
    import socket
    import threading

    pid = start_server(wired)
    slow = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    slow.connect(str(wired.state / "run" / "forkserver.sock"))
    slow.sendall((1 << 20).to_bytes(4, "big"))  # a frame of 1 MiB announced, and never sent whole
    stop = threading.Event()
    dropped = threading.Event()

    def trickle() -> None:
        while not stop.wait(0.5):
            try:
                slow.sendall(b"x")
            except OSError:
                dropped.set()
                return

    thread = threading.Thread(target=trickle, daemon=True)
    thread.start()
    try:
        caller, owner = ran_where("--target", "w", "--brief", "demo-sleep: 0.3", *SHORT)
        assert caller != owner  # served by a forkserver child meanwhile
        assert not dropped.is_set()
        wait_for(dropped.is_set, timeout=30, message="the forkserver kept a request that never came whole")
    finally:
        stop.set()
        thread.join(5)
        slow.close()
    assert server_pid(wired) == pid
    assert "no whole request within" in (wired.state / "run" / "forkserver.log").read_text()


def test_malformed_requests_leak_no_descriptor(wired):
    """Item 8: the forkserver kept the descriptors of every malformed request (8 -> 158 after 50)."""
    import array
    import socket

    pid = start_server(wired)
    path = str(wired.state / "run" / "forkserver.sock")
    log = wired.state / "run" / "forkserver.log"

    def open_fds() -> int:
        return len(os.listdir(f"/proc/{pid}/fd"))

    def refused() -> int:
        return log.read_text().count("request refused:")

    before, refused_before = open_fds(), refused()
    payloads = [
        (8).to_bytes(4, "big") + b"\xffnot-marshal",  # not a marshal'd value
        (1 << 30).to_bytes(4, "big"),  # a frame over the limit
        b"\x00\x00",  # ended early
    ]
    for i in range(50):
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
            sock.connect(path)
            fds = array.array("i", [0, 1, 2])
            sock.sendmsg([payloads[i % len(payloads)]], [(socket.SOL_SOCKET, socket.SCM_RIGHTS, fds)])
    wait_for(lambda: refused() == refused_before + 50, timeout=30, message=lambda: log.read_text()[-2000:])
    assert open_fds() == before, f"{open_fds()} descriptors open after 50 malformed requests, {before} before"
    caller, owner = ran_where("--target", "w", "--brief", "x", *SHORT)
    assert caller != owner  # and it still serves
