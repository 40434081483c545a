"""`mam web` in tests: the real command on a free port (the workspace's node serves it), in a workspace with demo
agents in real panes."""

from __future__ import annotations

import http.client
import json
import os
import select
import signal
import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest

from mam.util.poll import wait_for
from tests.helpers.jobs import FAST, create_demo
from tests.helpers.mamcli import mam, spawn_mam


@dataclass
class WebServer:
    proc: subprocess.Popen[str]  # `mam web` (it ends once the node serves; --foreground: it serves)
    base: str  # http://127.0.0.1:PORT
    login: str  # a login link (it works once)
    out: list[str] = field(default_factory=list)  # what it printed on stdout
    env: dict[str, str] | None = None
    stopped: bool = False

    @property
    def port(self) -> int:
        return int(urlsplit(self.base).port or 0)

    @property
    def token(self) -> str:
        """The bearer token for scripts: MAM_WEB_TOKEN, else the token file's."""
        env = {**os.environ, **(self.env or {})}
        if env.get("MAM_WEB_TOKEN"):
            return env["MAM_WEB_TOKEN"]
        return (Path(env["MAM_WORKSPACE"]) / ".mam" / "web-token").read_text().strip()

    @property
    def code(self) -> str:
        return code_of(self.login)

    def new_link(self) -> str:
        """Another login link, as `mam web` asked again prints it (the node serves the page)."""
        proc = mam("web", "--port", str(self.port), env=self.env, check=True)
        return next(line.strip() for line in proc.stdout.splitlines() if LINK in line)

    def log_in(self, link: str | None = None) -> dict[str, str]:
        """The headers the page sends once logged in with `link` (default: the first one): its cookie and
        its per-login secret. AssertionError when the login is refused."""
        status, headers, body = self.request(
            "/login",
            method="POST",
            headers={"Origin": self.base, "Content-Type": "application/json"},
            body=json.dumps({"code": code_of(link or self.login)}),
        )
        assert status == 200, (status, body)
        return {"Cookie": headers["set-cookie"].split(";", 1)[0], "X-Mam-Login": json.loads(body)["secret"]}

    @property
    def foreground(self) -> bool:
        return "--foreground" in self.proc.args

    def request(
        self,
        path: str,
        *,
        method: str = "GET",
        headers: dict[str, str] | None = None,
        body: str | None = None,
        timeout: float = 30,
    ) -> tuple[int, dict[str, str], bytes]:
        conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=timeout)
        try:
            conn.request(method, path, body=body, headers={"Host": f"127.0.0.1:{self.port}", **(headers or {})})
            resp = conn.getresponse()
            return resp.status, {k.lower(): v for k, v in resp.getheaders()}, resp.read()
        finally:
            conn.close()

    def state(self) -> dict[str, Any]:
        status, _h, body = self.request("/api/state", headers={"Authorization": f"Bearer {self.token}"})
        assert status == 200, body
        return json.loads(body)  # type: ignore[no-any-return]

    def stop(self) -> str:
        """Stop serving (`mam web --stop`; --foreground: Ctrl-C); what the server wrote to its log
        (the node's .mam/run/node.log; --foreground: its stderr)."""
        if not self.foreground:
            if not self.stopped:
                proc = mam("web", "--stop", env=self.env, check=True)
                assert proc.stdout.startswith("mam web: stopped serving"), proc.stdout
                self.stopped = True
            return node_log()
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGINT)
            try:
                self.proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        return self.proc.stderr.read() if self.proc.stderr else ""


LINK = "/login#code="


def code_of(link: str) -> str:
    return link.split(LINK, 1)[1]


def node_log() -> str:
    path = Path(os.environ["MAM_WORKSPACE"]) / ".mam" / "run" / "node.log"
    return path.read_text() if path.exists() else ""


def start_web(*args: str, env: dict[str, str] | None = None, timeout: float = 60) -> WebServer:
    """`mam web --port 0 ARGS`: the node serves the page (with --foreground, the command does)."""
    proc = spawn_mam("web", "--port", "0", *args, env=env)
    assert proc.stdout is not None
    lines: list[str] = []
    deadline = time.monotonic() + timeout
    buf = ""
    while not any(LINK in line for line in lines):
        if time.monotonic() > deadline:
            proc.kill()
            proc.wait()
            raise AssertionError(f"mam web did not print its link: {lines} {proc.stderr.read() if proc.stderr else ''}")
        ready, _, _ = select.select([proc.stdout], [], [], 0.2)
        if ready:
            chunk = os.read(proc.stdout.fileno(), 4096).decode()
            if not chunk and proc.poll() is not None:
                raise AssertionError(
                    f"mam web exited {proc.returncode}: {lines} {proc.stderr.read() if proc.stderr else ''}"
                )
            buf += chunk
            *done, buf = buf.split("\n")
            lines += done
    if "--foreground" not in args:
        rest, _err = proc.communicate(timeout=timeout)
        lines += (buf + rest).splitlines()
        assert proc.returncode == 0, (proc.returncode, lines, _err)
    login = next(line.strip() for line in lines if LINK in line)
    return WebServer(proc=proc, base=login.split(LINK, 1)[0], login=login, out=lines, env=env)


def job_state(job_id: str) -> str:
    proc = mam("job", "status", job_id, "--json")
    return json.loads(proc.stdout)["state"] if proc.returncode == 0 else ""


@pytest.fixture
def demo_workspace(workspace, mosquitto_broker, monkeypatch):  # type: ignore[no-untyped-def]
    """Demo agents in real panes on a real broker: `busy` (slow: a job that runs a long time and
    reports progress each second), `quiet` (idle) and `gone` (stopped). Yields the workspace."""
    for key, value in {**mosquitto_broker.env(), **FAST}.items():
        monkeypatch.setenv(key, value)
    create_demo("busy", behaviour="slow", env={"MAM_DEMO_SLEEP_S": "300"})
    create_demo("quiet")
    create_demo("gone")
    mam("session", "stop", "--session", "gone", check=True)
    yield workspace


@pytest.fixture
def delegate(demo_workspace):  # type: ignore[no-untyped-def]
    """Start a job on a session (its `mam job delegate` runs aside); every one is cancelled and reaped after."""
    started: list[tuple[str, subprocess.Popen[str]]] = []

    def run(target: str, job_id: str, *, running: bool = True) -> str:
        wrapper = spawn_mam(
            "job", "delegate", "--target", target, "--brief", "take your time", "--job-id", job_id,
            "--start-deadline", "200", "--heartbeat", "30", "--timeout", "600",
        )  # fmt: skip
        started.append((job_id, wrapper))
        if running:
            wait_for(lambda: job_state(job_id) == "running", timeout=60, message=f"{job_id} running")
        return job_id

    yield run
    for job_id, wrapper in started:
        mam("job", "cancel", job_id)
        try:
            wrapper.wait(timeout=60)
        except subprocess.TimeoutExpired:
            wrapper.kill()
            wrapper.wait()


@pytest.fixture
def web(demo_workspace) -> Iterator[WebServer]:  # type: ignore[no-untyped-def]
    server = start_web()
    try:
        yield server
    finally:
        server.stop()
