"""The embedded broker lets in only the workspace's login, and every mam process uses it unasked.

Raw paho clients play the other local user (no login, a wrong password, a wrong name) and the
person's own MQTT client (the login `mam broker status --json` names).
"""

from __future__ import annotations

import json
import os
import queue
import stat
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import paho.mqtt.client as paho
import pytest

from mam.broker.embedded import free_port, port_accepts
from mam.broker.endpoint import resolve_endpoint
from mam.bus.envelope import Envelope
from mam.errors import BrokerError, DecodeError
from mam.settings import load_settings
from mam.util import proc
from mam.util.fs import atomic_write_json
from mam.util.poll import wait_for
from mam.workspace import Workspace
from tests.helpers.embedded_broker import embedded_workspace
from tests.helpers.jobs import create_demo
from tests.helpers.mamcli import mam, mam_json


@pytest.fixture
def ws(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """A workspace with no broker configured; its embedded broker is stopped afterwards."""
    yield from embedded_workspace(tmp_path, monkeypatch)


class Client:
    """A raw paho client: CONNACK's reason, then (when let in) a subscription collecting messages."""

    def __init__(self, port: int, username: str | None = None, password: str | None = None) -> None:
        self.connack: queue.Queue[str] = queue.Queue()
        self.messages: list[tuple[str, bytes]] = []
        self.lock = threading.Lock()
        self.subscribed = threading.Event()
        self.c = paho.Client(paho.CallbackAPIVersion.VERSION2, protocol=paho.MQTTv311)
        if username is not None:
            self.c.username_pw_set(username, password)
        self.c.on_connect = lambda _c, _u, _f, rc, _p: self.connack.put(str(rc))
        self.c.on_subscribe = lambda *_a: self.subscribed.set()
        self.c.on_message = self._on_message
        self.c.connect("127.0.0.1", port)
        self.c.loop_start()
        self.reason = self.connack.get(timeout=10)

    def _on_message(self, _c: Any, _u: Any, msg: paho.MQTTMessage) -> None:
        with self.lock:
            self.messages.append((msg.topic, bytes(msg.payload)))

    def subscribe(self, topic: str) -> None:
        self.c.subscribe(topic, qos=1)
        assert self.subscribed.wait(10)

    def seen(self) -> list[tuple[str, bytes]]:
        with self.lock:
            return list(self.messages)

    def close(self) -> None:
        self.c.loop_stop()
        self.c.disconnect()


def test_only_the_workspace_login_gets_in(ws: Path) -> None:
    st = mam_json("broker", "start")
    anonymous = Client(st["port"])  # another local user, who knows the port (any port scan finds it)
    anonymous.close()
    assert anonymous.reason == "Not authorized"
    assert st["running"] is True and st["authenticated"] is True and st["username"] == "mam"
    password_file = Path(st["password_file"])
    assert password_file.parent == ws / ".mam" / "broker"
    info = password_file.stat()
    assert stat.S_IMODE(info.st_mode) == 0o600 and info.st_uid == os.getuid()
    password = password_file.read_text().strip()
    assert len(password) >= 32
    assert password not in json.dumps(st) and password not in mam("broker", "status").stdout

    refused = {
        "wrong password": Client(st["port"], "mam", password[:-1] + "x"),
        "wrong user": Client(st["port"], "root", password),
        "empty password": Client(st["port"], "mam", ""),
    }
    for what, client in refused.items():
        client.close()
        assert client.reason == "Not authorized", (what, client.reason)
    assert password not in (ws / ".mam" / "broker" / "broker.log").read_text()

    own = Client(st["port"], st["username"], password)  # a person's own client, with the login status named
    try:
        assert own.reason == "Success"
        own.subscribe("mine/#")
        own.c.publish("mine/hello", b"hi", qos=1).wait_for_publish(10)
        wait_for(lambda: ("mine/hello", b"hi") in own.seen(), timeout=10, message="own message not received")
    finally:
        own.close()


def test_the_wrapper_the_agent_and_the_heartbeater_use_the_login_unasked(ws: Path, tmux_server: Any) -> None:
    st = mam_json("broker", "start")
    watcher = Client(st["port"], st["username"], Path(st["password_file"]).read_text().strip())
    try:
        watcher.subscribe("#")
        create_demo("s1")
        done = mam(
            "job",
            "delegate",
            "--target",
            "s1",
            "--brief",
            "demo-sleep: 1",
            "--heartbeat",
            "0.3",
            "--job-id",
            "job-authed",
            "--json",
        )
        assert done.returncode == 0, done.stderr
        assert json.loads(done.stdout)["state"] == "completed"

        def published() -> set[tuple[str, str, str]]:
            out = set()
            for _topic, payload in watcher.seen():
                try:
                    env = Envelope.decode(payload)
                except DecodeError:
                    continue
                if env.job == "job-authed":
                    out.add((env.kind, env.sender, env.type))
            return out

        want = {
            ("event", "agent", "started"),
            ("event", "agent", "completed"),
            ("event", "heartbeater", "heartbeat"),
            ("state", "wrapper", "state"),
        }
        wait_for(lambda: want <= published(), timeout=10, message=lambda: f"seen only {published()}")
        # the monitor's connection (open_client, never starting a broker) gets in too
        from mam.bus.connect import open_client

        client = open_client(load_settings(environ={}), Workspace(ws), role="monitor", autostart=False, timeout=5)
        try:
            assert client.connected
        finally:
            client.close()
    finally:
        watcher.close()


def test_a_broker_left_by_an_older_mam_is_refused_clearly_then_replaced(ws: Path) -> None:
    w = Workspace(ws)
    w.ensure_state()
    w.broker_dir.mkdir(mode=0o700, exist_ok=True)
    port = free_port()
    log = open(w.broker_dir / "broker.log", "ab")
    old = subprocess.Popen(
        [sys.executable, "-m", "mam.broker.serve", "--port", str(port)],
        stdin=subprocess.DEVNULL,
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    log.close()
    try:
        wait_for(
            lambda: old.poll() is None and port_accepts(port),
            timeout=20,
            interval=0.02,
            message="old-style broker not up",
        )
        started = proc.start_time(old.pid)
        # what an older mam recorded: no login
        atomic_write_json(
            w.broker_dir / "broker.json", {"pid": old.pid, "pid_start": started, "port": port}, mode=0o600
        )
        st = mam_json("broker", "status")
        assert st["running"] is True and st["authenticated"] is False and st["username"] is None
        assert "lets every local user in" in mam("broker", "status").stdout
        with pytest.raises(
            BrokerError,
            match=r"started by an older mam and lets every local user in; restart it with "
            r"`mam broker stop && mam broker start`",
        ):
            resolve_endpoint(load_settings(environ={}), w, autostart=False)

        new = mam_json("broker", "start")  # replaces it, on the same port
        assert old.wait(15) is not None
        assert new["authenticated"] is True and new["pid"] != old.pid and new["port"] == port
        anonymous = Client(port)
        anonymous.close()
        assert anonymous.reason == "Not authorized"
    finally:
        if old.poll() is None:
            old.kill()
            old.wait(5)


def test_a_removed_password_file_gets_a_new_login_and_a_broker_that_takes_it(ws: Path) -> None:
    first = mam_json("broker", "start")
    Path(first["password_file"]).unlink()
    second = mam_json("broker", "start")
    assert second["pid"] != first["pid"] and second["port"] == first["port"]
    login = Client(second["port"], "mam", Path(second["password_file"]).read_text().strip())
    login.close()
    assert login.reason == "Success"
