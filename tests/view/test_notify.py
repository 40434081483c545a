"""MAM_NOTIFY: one message per (subject, kind) for `mam demo` (one failing job, one passing loop), to a local
HTTP server and to a command; a target that hangs or fails never holds up the job's exit."""

from __future__ import annotations

import json
import os
import shutil
import signal
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from mam.util.poll import wait_for
from tests.helpers.jobs import FAST, create_demo
from tests.helpers.mamcli import mam

CATCHER = """import json, sys
data = sys.stdin.read()
json.loads(data)
with open(sys.argv[1], "a") as f:
    f.write(data.replace("\\n", " ") + "\\n")
"""
HANG = """import os, sys, time
with open(sys.argv[1], "w") as f:
    f.write(f"{os.getpid()} {os.getppid()}")
sys.stdin.read()
time.sleep(300)
"""
FAIL = """import os, sys
with open(sys.argv[1], "a") as f:
    f.write(f"{os.getpid()} {os.getppid()}\\n")
sys.exit(3)
"""


class Catcher:
    def __init__(self) -> None:
        self.got: list[dict[str, Any]] = []
        catcher = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802
                body = self.rfile.read(int(self.headers["Content-Length"]))
                catcher.got.append({"content_type": self.headers["Content-Type"], **json.loads(body)})
                self.send_response(204)
                self.end_headers()

            def log_message(self, *args: object) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/hook/s3cr3t-path"

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


def kept_workspace(stdout: str) -> Path:
    line = next(x for x in stdout.splitlines() if "kept the workspace" in x)
    return Path(line.split("kept the workspace", 1)[1].strip())


def run_demo_with(target: str, tmp_path: Path, received) -> None:  # type: ignore[no-untyped-def]
    """`mam demo --keep` with MAM_NOTIFY=target; check the messages `received()` returns."""
    proc = mam("demo", "--keep", env={"MAM_NOTIFY": target, "TMPDIR": str(tmp_path)}, timeout=300)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    ws = kept_workspace(proc.stdout)
    try:
        jobs = json.loads(mam("job", "list", "--json", "--workspace", str(ws), check=True).stdout)
        # The demo recorded its sessions' end before it killed their server: no monitor took them for dead agents
        # (a session_terminated message each).
        rows = json.loads(mam("session", "status", "--json", "--workspace", str(ws), check=True).stdout)
        assert rows and {(r["status"], r["note"]) for r in rows} == {("terminated", "the demo ended")}, rows
        loops = [p.name for p in (ws / ".mam" / "loops").iterdir()]
        expected = {(j["id"], "job_ended") for j in jobs} | {(loop, "loop_ended") for loop in loops}
        log = ws / ".mam" / "notify" / "notify.log"
        wait_for(
            lambda: log.is_file() and log.read_text().count(" sent ") == len(expected),
            timeout=60,
            message=lambda: f"{len(expected)} notifications sent; the log: {log.read_text() if log.is_file() else '-'}",
        )
        got = received()
        pairs = [(m["subject"], m["kind"]) for m in got]
        assert sorted(pairs) == sorted(expected)  # every job and the loop, each exactly once
        failed = [m for m in got if m["kind"] == "job_ended" and m["state"] == "failed"]
        assert len(failed) == 1 and failed[0]["session"] == "flaky" and failed[0]["reason"] == "agent_error"
        (loop,) = [m for m in got if m["kind"] == "loop_ended"]
        assert loop["state"] == "passed" and loop["exit_code"] == 0 and loop["session"] == "creator"
        text = json.dumps(got) + log.read_text()
        assert "token" not in text and "nonce" not in text
        password = (ws / ".mam" / "broker" / "password").read_text().strip()
        assert password not in text
        assert "s3cr3t-path" not in log.read_text()  # the log names the host, never the URL's path
        assert (log.stat().st_mode & 0o777) == 0o600
    finally:
        shutil.rmtree(ws, ignore_errors=True)


def test_demo_to_a_local_http_server_sends_one_message_per_subject_and_kind(tmp_path, tmux_server):  # type: ignore[no-untyped-def]
    catcher = Catcher()
    try:
        run_demo_with(catcher.url, tmp_path, lambda: catcher.got)
        assert {m["content_type"] for m in catcher.got} == {"application/json"}
    finally:
        catcher.close()


def test_demo_to_a_command_sends_one_message_per_subject_and_kind(tmp_path, tmux_server):  # type: ignore[no-untyped-def]
    script, out = tmp_path / "catch.py", tmp_path / "caught.jsonl"
    script.write_text(CATCHER)
    target = f"{sys.executable} {script} '{out}'"
    run_demo_with(target, tmp_path, lambda: [json.loads(x) for x in out.read_text().splitlines()])


def _kill(pids: list[int]) -> None:
    for pid in pids:
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def test_a_hanging_target_never_holds_up_the_job(workspace, broker, monkeypatch, tmp_path):  # type: ignore[no-untyped-def]
    script, pidfile = tmp_path / "hang.py", tmp_path / "hang.pid"
    script.write_text(HANG)
    for key, value in {**broker.env(), **FAST, "MAM_NOTIFY": f"{sys.executable} {script} {pidfile}"}.items():
        monkeypatch.setenv(key, value)
    create_demo("w", behaviour="error")
    pids: list[int] = []
    try:
        proc = mam("job", "delegate", "--target", "w", "--brief", "x", "--start-deadline", "10", "--heartbeat", "0.5")
        assert proc.returncode == 1, proc.stderr
        wait_for(lambda: pidfile.is_file() and " " in pidfile.read_text(), timeout=30, message="the target started")
        pids = [int(x) for x in pidfile.read_text().split()]
        # The job's wrapper has exited while the target it notified still hangs, with its sender waiting on it.
        assert _alive(pids[0]) and _alive(pids[1])
    finally:
        _kill(pids[::-1])


def test_a_failing_target_is_retried_in_the_background_and_logged(workspace, broker, monkeypatch, tmp_path):  # type: ignore[no-untyped-def]
    script, calls = tmp_path / "fail.py", tmp_path / "calls"
    script.write_text(FAIL)
    for key, value in {**broker.env(), **FAST, "MAM_NOTIFY": f"{sys.executable} {script} {calls}"}.items():
        monkeypatch.setenv(key, value)
    create_demo("w")
    pids: list[int] = []
    try:
        proc = mam(
            "job", "delegate", "--target", "w", "--brief", "demo-write: a.txt :: x", "--json", "--heartbeat", "0.5"
        )
        assert proc.returncode == 0, proc.stderr
        job_id = json.loads(proc.stdout)["id"]
        log = workspace.state / "notify" / "notify.log"
        wait_for(lambda: calls.is_file() and len(calls.read_text().splitlines()) >= 2, timeout=30, message="a retry")
        pids = [int(line.split()[1]) for line in calls.read_text().splitlines()][:1]
        text = log.read_text()
        assert f"attempt 1 of 4 failed for job_ended {job_id}" in text and "exited 3" in text
        # the job itself ended as it would have anyway
        assert json.loads(mam("job", "status", job_id, "--json", check=True).stdout)["state"] == "completed"
    finally:
        _kill(pids)


@pytest.mark.parametrize("kind", ["job_ended"])
def test_send_claims_each_subject_and_kind_once(workspace, monkeypatch, tmp_path, kind):  # type: ignore[no-untyped-def]
    from mam import notify
    from mam.settings import load_settings

    out, script = tmp_path / "caught.jsonl", tmp_path / "catch.py"
    script.write_text(CATCHER)
    workspace.ensure_state()
    settings = load_settings(env_file=None, environ={"MAM_NOTIFY": f"{sys.executable} {script} {out}"})
    payload = {"job": "job-1", "state": "failed", "token": "abc", "message": "m" * 5000}
    assert notify.send(workspace, settings, kind=kind, subject="job-1", payload=payload)
    assert not notify.send(workspace, settings, kind=kind, subject="job-1", payload=payload)
    assert notify.send(workspace, settings, kind="waiting", subject="job-1", payload=payload)
    wait_for(lambda: out.is_file() and len(out.read_text().splitlines()) == 2, timeout=30, message="two messages")
    got = [json.loads(x) for x in out.read_text().splitlines()]
    assert sorted(m["kind"] for m in got) == [kind, "waiting"]
    assert all("token" not in m and len(m["message"]) == notify.MESSAGE_MAX for m in got)
    assert not notify.send(workspace, load_settings(env_file=None, environ={}), kind="x", subject="y", payload={})
