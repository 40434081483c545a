"""The node (mam/node): `mam job delegate` and the agents' `mam event` served by one long-running
process per workspace, with real tmux, the demo agent and a real broker. The node runs the job under
its own pid and streams the command's output to the caller; the caller's interrupt leaves the job
running in the node; a killed node is replaced and the job followed there, the brief typed once;
MAM_NODE=0 runs the same command in the caller; a slow or malformed connection stalls nothing and
leaks nothing; the node ends with the workspace's tmux server; `mam node status|stop`."""

from __future__ import annotations

import array
import json
import os
import signal
import socket
import subprocess
import threading
from pathlib import Path

import pytest

from mam.util.poll import wait_for
from mam.util.proc import pid_alive
from mam.workspace import Workspace
from tests.helpers.jobs import create_demo
from tests.helpers.mamcli import MAM, mam, spawn_mam

SHORT = ["--start-deadline", "10", "--heartbeat", "0.5"]


def node_pid(ws: Workspace) -> int:
    """The node's pid if one serves now (its status file and its socket), else 0."""
    run = ws.state / "run"
    try:
        pid = int(json.loads((run / "node.json").read_text())["pid"])
    except (OSError, ValueError, KeyError):
        return 0
    return pid if pid_alive(pid) and (run / "node.sock").exists() else 0


def start_node(ws: Workspace) -> int:
    """Run one job (it starts the node), then wait for the node to serve."""
    create_demo("w")
    done = mam("job", "delegate", "--target", "w", "--brief", "warm up", "--json", *SHORT)
    assert done.returncode == 0, done.stderr
    return wait_for(lambda: node_pid(ws), timeout=30, message="no node started")


def owner_pid(ws: Workspace, job_id: str) -> int:
    record = json.loads(ws.job_record(job_id).read_text())
    return int(str(record["owner"]).split(":")[1])


def open_job(ws: Workspace, state: str = "running") -> str:
    from mam.store import jobs as jobs_table
    from mam.store.registry import Registry

    registry = Registry(ws)
    try:

        def found() -> str:
            with registry.read() as conn:
                rows = [r for r in jobs_table.open_jobs(conn) if r.state == state]
            return rows[0].id if rows else ""

        return wait_for(found, timeout=30, message=f"no job reached {state}")
    finally:
        registry.close()


def ran_where(*args: str, env: dict[str, str] | None = None) -> tuple[int, int]:
    """(the caller's pid, the pid that owned its job) for one delegation."""
    proc = spawn_mam("job", "delegate", *args, "--json", env=env)
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 0, err
    return proc.pid, owner_pid(Workspace(Path(os.environ["MAM_WORKSPACE"])), json.loads(out)["id"])


def test_a_delegation_runs_in_the_node_with_the_same_result_as_in_the_caller(wired):
    pid = start_node(wired)
    proc = spawn_mam("job", "delegate", "--target", "w", "--brief", "demo-write: out.txt :: served", "--json", *SHORT)
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 0, err
    record = json.loads(out)
    assert record["state"] == "completed" and record["exit_code"] == 0
    assert owner_pid(wired, record["id"]) == pid != proc.pid  # the node drove it
    assert err.splitlines()[0] == record["id"]  # the job id first, on the caller's stderr
    assert (wired.root / "out.txt").read_text() == "served\n"
    # The same command with MAM_NODE=0 runs in the caller's process and prints the same kind of record.
    caller, owner = ran_where("--target", "w", "--brief", "x", *SHORT, env={"MAM_NODE": "0"})
    assert caller == owner
    off = mam("job", "delegate", "--target", "w", "--brief", "x", "--json", *SHORT, env={"MAM_NODE": "0"})
    assert off.returncode == 0 and set(json.loads(off.stdout)) == set(record)
    assert node_pid(wired) == pid


def test_the_agents_events_are_taken_by_the_node(wired):
    pid = start_node(wired)
    done = mam("job", "delegate", "--target", "w", "--brief", "x", "--json", *SHORT)
    assert done.returncode == 0, done.stderr
    log = (wired.state / "run" / "node.log").read_text()
    assert "serving workspace" in log and f"node[{pid}]" in log


def test_stdin_and_usage_errors_pass_through(wired):
    start_node(wired)
    done = mam(
        "job", "delegate", "--target", "w", "--brief-file", "-", "--json", *SHORT, input="demo-write: in.txt :: piped"
    )
    assert done.returncode == 0, done.stderr
    assert (wired.root / "in.txt").read_text() == "piped\n"
    bad = mam("job", "delegate", "--target", "w", "--brief", "x", "--timeout", "nan")
    plain = mam("job", "delegate", "--target", "w", "--brief", "x", "--timeout", "nan", env={"MAM_NODE": "0"})
    assert bad.returncode == plain.returncode == 2
    assert bad.stderr == plain.stderr and bad.stdout == plain.stdout


def test_stdin_is_read_untranslated_as_a_fresh_process_reads_it(wired):
    import hashlib

    start_node(wired)
    brief = "first line\r\nsecond\rthird\n"
    shas = []
    for env in ({}, {"MAM_NODE": "0"}):
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


def test_a_relative_brief_file_is_read_from_the_callers_folder(wired, tmp_path):
    start_node(wired)
    folder = tmp_path / "elsewhere"
    folder.mkdir()
    (folder / "brief.md").write_text("demo-write: rel.txt :: relative")
    proc = subprocess.run(
        [MAM, "job", "delegate", "--target", "w", "--brief-file", "brief.md", "--json", *SHORT],
        cwd=folder,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 0, proc.stderr
    assert (wired.root / "rel.txt").read_text() == "relative\n"


@pytest.mark.parametrize("setting", [{"MAM_NODE": "0"}, {"MAM_NO_AUTOSTART": "1"}])
def test_turned_off_or_no_autostart_no_node_starts(wired, setting):
    create_demo("w")
    caller, owner = ran_where("--target", "w", "--brief", "x", *SHORT, env=setting)
    assert caller == owner and node_pid(wired) == 0
    assert not (wired.state / "run" / "node.sock").exists()


def test_mam_node_0_in_the_env_file_runs_in_the_caller(wired):
    create_demo("w")
    (wired.root / ".mam.env").write_text("MAM_NODE=0\n")
    os.chmod(wired.root / ".mam.env", 0o600)
    caller, owner = ran_where("--target", "w", "--brief", "x", *SHORT)
    assert caller == owner
    assert node_pid(wired) == 0


def test_looking_starts_no_node(wired):
    create_demo("w")
    for args in (("status",), ("monitor", "--once"), ("node", "status"), ("top", "--snapshot")):
        mam(*args)
    assert node_pid(wired) == 0 and not (wired.state / "run" / "node.lock").exists()


def test_a_socket_others_may_use_is_not_trusted(wired):
    pid = start_node(wired)
    os.chmod(wired.state / "run" / "node.sock", 0o666)
    # MAM_NO_AUTOSTART=1: the caller looks at the socket (mam.node.client.connect refuses it) and runs the job
    # itself at once. With autostart it would also try to start a node, find the running one's lock held and
    # wait out START_WAIT_S (20 s) before running it here: the same refusal, 20 s later.
    caller, owner = ran_where("--target", "w", "--brief", "x", *SHORT, env={"MAM_NO_AUTOSTART": "1"})
    assert caller == owner  # it ran in the caller's own process
    assert node_pid(wired) == pid  # although the node still served


def test_it_ends_with_the_workspace_tmux_server(wired, tmux_server):
    pid = start_node(wired)
    subprocess.run(["tmux", "-L", tmux_server.name, "kill-server"], capture_output=True)
    wait_for(lambda: not pid_alive(pid), timeout=20, message="the node outlived the tmux server")
    assert not (wired.state / "run" / "node.sock").exists()


def test_status_and_stop(wired, broker):
    pid = start_node(wired)
    shown = mam("node", "status", "--json")
    assert shown.returncode == 0, shown.stderr
    status = json.loads(shown.stdout)
    assert status["running"] is True and status["pid"] == pid and status["open_jobs"] == []
    assert {"started", "name", "broker", "socket"} <= set(status)
    address = f"{broker.host}:{broker.port}"
    assert (status["broker"]["in_use"], status["broker"]["embedded"]) == (address, False), status["broker"]
    assert [b["broker"] for b in status["broker"]["brokers"]] == [address]
    stopped = mam("node", "stop")
    assert stopped.returncode == 0, stopped.stderr
    assert not pid_alive(pid), "the node outlived `mam node stop`"  # it returns once the node has ended
    none = mam("node", "status", "--json")
    assert none.returncode == 5 and json.loads(none.stdout)["running"] is False


def test_a_node_started_with_ld_preload_does_not_keep_it(wired, monkeypatch):
    """A caller's loader variables never reach the node that later callers share."""
    monkeypatch.setenv("LD_PRELOAD", "libm.so.6")  # a real library, harmless: what matters is that it is dropped
    monkeypatch.setenv("PYTHONPATH", "/nonexistent")
    pid = start_node(wired)
    with open(f"/proc/{pid}/environ", "rb") as f:
        names = {item.split(b"=", 1)[0] for item in f.read().split(b"\0")}
    assert b"LD_PRELOAD" not in names and b"PYTHONPATH" not in names


@pytest.mark.parametrize(("sig", "code"), [(signal.SIGINT, 130), (signal.SIGTERM, 143), (signal.SIGHUP, 129)])
def test_an_interrupted_caller_leaves_the_job_running_in_the_node(wired, sig, code):
    pid = start_node(wired)
    create_demo("x")
    # The turn lasts until the caller is interrupted (demo-await), however slow the machine: with a fixed
    # `demo-sleep: 3` a loaded machine let the job complete before the signal reached the caller.
    go = wired.root / "go"
    brief = f"demo-await: {go}\ndemo-write: out.txt :: finished after the interrupt"
    proc = spawn_mam("job", "delegate", "--target", "x", "--brief", brief, "--json", "--start-deadline", "30")
    try:
        job = open_job(wired)
        assert owner_pid(wired, job) == pid
        proc.send_signal(sig)
        out, err = proc.communicate(timeout=30)
        go.touch()
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    assert proc.returncode == code, err
    assert f"job {job} is still running; follow it with: mam job wait {job}" in err.splitlines()
    assert out == ""
    waited = mam("job", "wait", job, "--json", timeout=60)
    assert waited.returncode == 0, waited.stderr
    assert json.loads(waited.stdout)["state"] == "completed"
    assert owner_pid(wired, job) == pid  # the node drove it to its end: nobody had to take it over
    assert (wired.root / "out.txt").read_text() == "finished after the interrupt\n"


@pytest.mark.real_brokers  # the job path on amqtt and Mosquitto, not only the double
def test_a_killed_node_is_replaced_and_the_job_followed_there_typed_once(wired):
    pid = start_node(wired)
    s = create_demo("x")
    brief = "demo-sleep: 4\ndemo-write: k.txt :: after the node was killed"
    proc = spawn_mam("job", "delegate", "--target", "x", "--brief", brief, "--json", "--start-deadline", "30")
    try:
        job = open_job(wired)
        os.kill(pid, signal.SIGKILL)
        out, err = proc.communicate(timeout=90)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    assert proc.returncode == 0, err
    record = json.loads(out)
    assert record["id"] == job and record["state"] == "completed", (err, out)
    assert owner_pid(wired, job) == node_pid(wired) != pid  # taken over by the next node
    conversation = wired.state / "demo-agent" / "conversations" / f"{s['conversation_id']}.json"
    turns = json.loads(conversation.read_text())["turns"]
    assert sum(1 for t in turns if t["role"] == "user" and job in t["text"]) == 1  # typed once


def test_a_job_not_yet_typed_when_the_node_is_killed_is_typed_by_the_next_node_not_closed(wired):
    """The second job waits for the session's first when the node dies: its client lives and runs the
    delegation again in the next node, so that node's monitor leaves it open (not `wrapper_died`), and it is
    typed once there."""
    pid = start_node(wired)
    s = create_demo("q")
    first = spawn_mam(
        "job", "delegate", "--target", "q", "--brief", "demo-sleep: 3", "--json", "--start-deadline", "30"
    )
    second = None
    try:
        open_job(wired)
        second = spawn_mam(
            "job", "delegate", "--target", "q", "--brief", "demo-write: q.txt :: second", "--json",
            "--start-deadline", "30",
        )  # fmt: skip
        waiting = open_job(wired, "pending")
        os.kill(pid, signal.SIGKILL)
        out, err = second.communicate(timeout=90)
        first.communicate(timeout=90)
    finally:
        for proc in (first, second):
            if proc is not None and proc.poll() is None:
                proc.kill()
                proc.communicate()
    assert second.returncode == 0, err
    record = json.loads(out)
    assert record["id"] == waiting and record["state"] == "completed", (err, out)
    assert (wired.root / "q.txt").read_text() == "second\n"
    conversation = wired.state / "demo-agent" / "conversations" / f"{s['conversation_id']}.json"
    turns = json.loads(conversation.read_text())["turns"]
    assert sum(1 for t in turns if t["role"] == "user" and waiting in t["text"]) == 1


def test_a_slow_caller_stalls_no_other_delegation_and_is_dropped(wired):
    pid = start_node(wired)
    slow = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    slow.connect(str(wired.state / "run" / "node.sock"))
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
        assert owner == pid != caller  # served by the node meanwhile
        assert not dropped.is_set()
        wait_for(dropped.is_set, timeout=30, message="the node kept a request that never came whole")
    finally:
        stop.set()
        thread.join(5)
        slow.close()
    assert node_pid(wired) == pid


def test_malformed_requests_leak_no_descriptor(wired):
    pid = start_node(wired)
    path = str(wired.state / "run" / "node.sock")

    def open_fds() -> int:
        return len(os.listdir(f"/proc/{pid}/fd"))

    before = open_fds()
    payloads = [
        (8).to_bytes(4, "big") + b"\xffnot-json",  # not JSON
        (1 << 30).to_bytes(4, "big"),  # a frame over the limit
        b"\x00\x00",  # ended early
        (2).to_bytes(4, "big") + b"[]",  # JSON, not an object
        (30).to_bytes(4, "big") + b'{"argv": 1, "env": {}, "cwd": 2}',  # an object, not a request
    ]
    for i in range(50):
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
            sock.connect(path)
            fds = array.array("i", [0, 1, 2])
            sock.sendmsg([payloads[i % len(payloads)]], [(socket.SOL_SOCKET, socket.SCM_RIGHTS, fds)])
            sock.shutdown(socket.SHUT_WR)  # ended here: the node sees the end, not its read deadline
            sock.settimeout(15)
            try:
                while sock.recv(4096):
                    pass  # until the node closes it
            except OSError:
                pass
    # At most as many as before (one the warm-up job still held may close meanwhile: fewer is no leak).
    wait_for(lambda: open_fds() <= before, timeout=15, message=lambda: f"{open_fds()} descriptors, {before} before")
    caller, owner = ran_where("--target", "w", "--brief", "x", *SHORT)
    assert owner == pid != caller  # and it still serves


def _beats(ws: Workspace, job_id: str) -> list[int]:
    """When each of the job's heartbeater beats was taken (ms), from its audit log."""
    from mam.jobs.record import read_audit

    return [
        int(x["input"]["at"])
        for x in read_audit(ws, job_id)
        if x["kind"] == "input" and x["input"].get("sender") == "heartbeater"
    ]


def _cmdline(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()
    except OSError:
        return ""


def _heartbeaters(job_id: str) -> list[int]:
    """The heartbeater processes of the job (a thread of the node is none)."""
    return [
        int(p)
        for p in os.listdir("/proc")
        if p.isdigit() and "mam.jobs.heartbeat" in _cmdline(int(p)) and job_id in _cmdline(int(p))
    ]


def _beating_job(ws: Workspace, write: str, *, heartbeat: str) -> tuple[int, subprocess.Popen[str], str]:
    """(the node's pid, the delegating client, its job) for an 8 s job of a new session `x` that beats every
    `heartbeat` seconds and then writes `write` (demo-write's PATH :: TEXT), once it is running."""
    pid = start_node(ws)
    create_demo("x")
    brief = f"demo-sleep: 8\ndemo-write: {write}"
    proc = spawn_mam("job", "delegate", "--target", "x", "--brief", brief, "--json", "--heartbeat", heartbeat)
    try:
        return pid, proc, open_job(ws)
    except BaseException:
        proc.kill()
        proc.communicate()
        raise


def test_the_heartbeats_run_in_the_node_and_go_on_in_a_process_when_it_stops(wired):
    from mam.jobs import heartbeat

    pid, proc, job = _beating_job(wired, "hb.txt :: beat through a node stop", heartbeat="0.5")
    try:
        wait_for(lambda: len(_beats(wired, job)) >= 2, timeout=30, message="no beats")
        found = heartbeat.recorded(wired, job)
        assert found is not None and found[0] == pid  # a thread of the node, no interpreter of its own
        assert _heartbeaters(job) == []
        stopped = mam("node", "stop")
        assert stopped.returncode == 0, stopped.stderr
        wait_for(lambda: not pid_alive(pid), timeout=20, message="the node outlived `mam node stop`")
        handed = wait_for(lambda: _heartbeaters(job), timeout=20, message="not handed over to a process")
        assert heartbeat.recorded(wired, job)[0] in handed  # type: ignore[index]
        since = len(_beats(wired, job))
        wait_for(lambda: len(_beats(wired, job)) > since + 1, timeout=20, message="the beats stopped with the node")
        out, err = proc.communicate(timeout=90)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    assert proc.returncode == 0, err
    assert json.loads(out)["state"] == "completed"
    assert (wired.root / "hb.txt").read_text() == "beat through a node stop\n"
    wait_for(lambda: heartbeat.recorded(wired, job) is None, timeout=20, message="the heartbeater outlived its job")


def test_a_killed_nodes_heartbeats_are_started_again_by_the_next_node(wired):
    from mam.jobs.record import read_audit

    pid, proc, job = _beating_job(wired, "hk.txt :: beat after a node kill", heartbeat="1")
    try:
        wait_for(lambda: len(_beats(wired, job)) >= 1, timeout=30, message="no beats")
        os.kill(pid, signal.SIGKILL)
        killed = len(_beats(wired, job))

        def story() -> str:
            audit = [(x["kind"], x.get("pid"), (x.get("input") or {}).get("type")) for x in read_audit(wired, job)]
            return f"no beat after the node was killed: {audit}\n{(wired.state / 'run' / 'node.log').read_text()}"

        wait_for(lambda: len(_beats(wired, job)) > killed, timeout=30, message=story)
        out, err = proc.communicate(timeout=90)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    assert proc.returncode == 0, err
    assert json.loads(out)["state"] == "completed"
    assert any(x["kind"] == "heartbeat_restarted" for x in read_audit(wired, job))


def _has_socket(pid: int) -> bool:
    try:
        return any(os.readlink(f"/proc/{pid}/fd/{fd}").startswith("socket:") for fd in os.listdir(f"/proc/{pid}/fd"))
    except OSError:
        return False


def test_a_command_sent_to_a_node_being_killed_runs_in_the_next_node(wired):
    """A node that is being killed can still accept a connection (its listening socket lives until the process is
    gone; under load a SIGKILL waits for a disk write): the command it never took is asked again of a new node, not
    run in the caller, where `mam routine add` would start no node and no routine would fire."""
    pid = start_node(wired)
    os.kill(pid, signal.SIGSTOP)  # its backlog takes the connection; nothing answers
    proc = spawn_mam("routine", "add", "r1", "--target", "w", "--brief", "tick", "--every", "1h")
    try:
        wait_for(lambda: _has_socket(proc.pid), timeout=30, message="the command never connected")
        os.kill(pid, signal.SIGKILL)
        out, err = proc.communicate(timeout=60)
    finally:
        if pid_alive(pid):
            os.kill(pid, signal.SIGKILL)
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    assert proc.returncode == 0, err
    assert "no node ran this command" not in err, err
    assert node_pid(wired) not in (0, pid)  # the next node took it and fires the routine
    listed = json.loads(mam("routine", "list", "--json", check=True).stdout)
    assert [r["name"] for r in listed] == ["r1"]


def _answered(sock: socket.socket) -> dict:  # type: ignore[type-arg]
    """Read frames until the final one (it has `exit`) and return it; the socket stays open."""
    from mam.node.wire import Frames

    frames = Frames()
    while True:
        data = sock.recv(65536)
        assert data, "the node closed the connection before its answer"
        for msg in frames.feed(data):
            if "exit" in msg:
                return msg


def test_finished_requests_whose_clients_keep_their_sockets_open_leave_no_thread(wired):
    """Issue 39, item 11: a finished request kept a node thread while its client held the socket open (100
    requests: 96 threads). The node shuts each connection down once it has answered."""
    from mam.node.wire import frame
    from mam.protocol import request

    pid = start_node(wired)
    path = str(wired.state / "run" / "node.sock")

    def threads() -> int:
        return len(os.listdir(f"/proc/{pid}/task"))

    before = threads()
    held: list[socket.socket] = []
    try:
        for i in range(100):
            sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            held.append(sock)
            sock.connect(path)
            # A served operation (its own watcher thread) and a control one (answered by the connection's thread).
            asked = request("cancel", {"job": f"job-gone-{i:04d}"}) if i % 2 else request("status", {})
            sock.sendall(frame(asked))
            assert _answered(sock)["exit"] in (0, 5)
        wait_for(lambda: threads() <= before, timeout=15, message=lambda: f"{threads()} threads, {before} before")
    finally:
        for sock in held:
            sock.close()


def test_a_raw_request_to_one_workspaces_node_never_acts_on_another(wired, tmp_path):
    """Issue 39, item 12: a node request carries no workspace (docs/node-protocol.md): a node acts on its own
    workspace only. A raw request to workspace A's node that names workspace B, by a field, by a setting, or by
    B's job and session, is refused or acts on A, and B is left as it was."""
    from mam.node.wire import frame
    from mam.protocol import VERSION, settings_of

    start_node(wired)
    other = tmp_path / "other"
    other.mkdir()
    b = ["-w", str(other)]
    mam(*b, "session", "create", "--agent", "demo", "--role", "dev", "--session", "bw", check=True)
    done = mam(*b, "job", "delegate", "--target", "bw", "--brief", "b's own", "--json", *SHORT, env={"MAM_NODE": "0"})
    assert done.returncode == 0, done.stderr
    b_job = json.loads(done.stdout)["id"]
    record = other / ".mam" / "jobs" / f"{b_job}.json"
    before = record.read_bytes()

    def ask(args: dict, settings: dict | None = None, op: str = "cancel") -> dict:  # type: ignore[type-arg]
        # The test's broker settings go along (as any client sends its own): without them the node would
        # start the workspace's embedded broker for the request.
        sent = {**settings_of(os.environ), **(settings or {})}
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
            sock.connect(str(wired.state / "run" / "node.sock"))
            sock.sendall(frame({"v": VERSION, "op": op, "args": args, "settings": sent}))
            return _answered(sock)

    named = ask({"job": b_job, "workspace": str(other)})
    assert named["exit"] == 2 and "unknown field 'workspace'" in named["error"]
    by_setting = ask({"job": b_job}, {"MAM_WORKSPACE": str(other)})  # no such setting: A's registry is asked
    assert by_setting["exit"] == 5, by_setting
    typed = ask({"target": "bw", "brief": "typed from A", "job_id": "job-cross-ws-0001"}, op="delegate")
    assert typed["exit"] == 5, typed  # A has no session bw
    assert record.read_bytes() == before and not (other / ".mam" / "run" / "node.sock").exists()
    b_jobs = json.loads(mam(*b, "job", "list", "--json", check=True).stdout)
    assert [j["id"] for j in b_jobs] == [b_job]
    mam(*b, "session", "stop", "--session", "bw")
