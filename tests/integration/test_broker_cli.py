"""`mam broker start|stop|status` as a user runs them, against the real embedded amqtt broker.

Also: looking (`status`, `config`) starts nothing, and `mam --help` imports none of the heavy parts.
"""

from __future__ import annotations

import json
import os
import queue
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from mam.util import proc
from tests.helpers.embedded_broker import embedded_workspace, gone

HEAVY = ("paho", "amqtt", "libtmux", "mcp", "pydantic", "starlette", "uvicorn", "anyio")


def run_mam(*args: str, ws: Path, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    full_env = {**os.environ, "MAM_WORKSPACE": str(ws), **(env or {})}
    return subprocess.run(
        [sys.executable, "-m", "mam", *args],
        cwd=ws,
        env=full_env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def broker_json(*args: str, ws: Path) -> dict[str, object]:
    r = run_mam("broker", *args, "--json", ws=ws)
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout)


@pytest.fixture
def ws(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """A workspace with no broker configured; its embedded broker is always stopped afterwards."""
    yield from embedded_workspace(tmp_path, monkeypatch)


def listeners(port: int) -> list[str]:
    """Local addresses (hex, as in /proc/net/tcp*) of sockets listening on `port`."""
    found = []
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            lines = Path(table).read_text().splitlines()[1:]
        except OSError:
            continue
        for line in lines:
            fields = line.split()
            address, hex_port = fields[1].split(":")
            if int(hex_port, 16) == port and fields[3] == "0A":  # 0A: LISTEN
                found.append(address)
    return found


def test_start_then_a_paho_client_round_trips(ws: Path, poll):
    import paho.mqtt.client as mqtt

    st = broker_json("start", ws=ws)
    assert st["running"] is True and st["host"] == "127.0.0.1"
    port = st["port"]
    assert isinstance(port, int) and port != 1883

    got: queue.Queue[tuple[str, bytes]] = queue.Queue()
    subscribed: queue.Queue[int] = queue.Queue()
    client = mqtt.Client(mqtt.CallbackAPIVersion.VERSION2, client_id="mam-test-broker-cli", protocol=mqtt.MQTTv311)
    client.on_message = lambda c, u, msg: got.put((msg.topic, msg.payload))
    client.on_subscribe = lambda c, u, mid, reason_codes, props: subscribed.put(mid)
    client.username_pw_set(
        str(st["username"]), Path(str(st["password_file"])).read_text().strip()
    )  # the login status names
    client.connect("127.0.0.1", port)
    client.loop_start()
    try:
        poll(client.is_connected, timeout=10, message="paho client did not connect")
        client.subscribe("mam/test/#", qos=1)
        subscribed.get(timeout=10)
        client.publish("mam/test/hello", b"payload-1", qos=1).wait_for_publish(timeout=10)
        assert got.get(timeout=10) == ("mam/test/hello", b"payload-1")
    finally:
        client.disconnect()
        client.loop_stop()


def test_start_twice_keeps_the_same_process(ws: Path):
    first = broker_json("start", ws=ws)
    second = broker_json("start", ws=ws)
    assert first["pid"] == second["pid"] and first["port"] == second["port"]
    assert proc.pid_alive(int(first["pid"]))
    assert (ws / ".mam" / "broker" / "broker.pid").read_text().strip() == str(first["pid"])
    status = broker_json("status", ws=ws)
    assert status["running"] is True and status["pid"] == first["pid"]


def test_stop_leaves_no_broker_process(ws: Path, poll):
    pid = int(broker_json("start", ws=ws)["pid"])
    port = int(broker_json("status", ws=ws)["port"])
    st = broker_json("stop", ws=ws)
    assert st["running"] is False and st["pid"] is None
    assert gone(pid), f"broker pid {pid} still runs after stop"
    assert not (ws / ".mam" / "broker" / "broker.pid").exists()
    assert listeners(port) == []
    # Stopping again is harmless and says so; a later start reuses the recorded port.
    assert broker_json("stop", ws=ws)["running"] is False
    again = broker_json("start", ws=ws)
    said = run_mam("broker", "stop", ws=ws).stdout
    assert said.startswith(f"embedded broker stopped (was pid {again['pid']}")
    assert run_mam("broker", "stop", ws=ws).stdout.strip() == "embedded broker not running"
    again = broker_json("start", ws=ws)
    assert again["pid"] != pid and again["running"] is True


def test_broker_listens_on_loopback_only(ws: Path):
    st = broker_json("start", ws=ws)
    port = int(st["port"])
    addresses = listeners(port)
    assert addresses == ["0100007F"], f"listening on {addresses} (want 127.0.0.1 only)"


def test_status_and_config_start_nothing_and_write_nothing(ws: Path):
    """With MQTT_BROKER unset and nothing running, looking starts no process and creates no file."""
    before = sorted(p.relative_to(ws) for p in ws.rglob("*"))
    # A subreaper adopts every process a command leaves behind, however detached it is.
    driver = r"""
import ctypes, json, os, subprocess, sys
libc = ctypes.CDLL(None, use_errno=True)
assert libc.prctl(36, 1, 0, 0, 0) == 0  # PR_SET_CHILD_SUBREAPER
codes = []
for args in (["broker", "status"], ["broker", "status", "--json"], ["config"], ["config", "--json"]):
    codes.append(subprocess.run([sys.executable, "-m", "mam", *args], stdout=subprocess.DEVNULL).returncode)
with open(f"/proc/{os.getpid()}/task/{os.getpid()}/children") as f:
    left = [int(x) for x in f.read().split()]
print(json.dumps({"codes": codes, "left": left}))
"""
    r = subprocess.run(
        [sys.executable, "-c", driver],
        cwd=ws,
        env={**os.environ},
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert r.returncode == 0, r.stderr
    result = json.loads(r.stdout)
    assert result["codes"] == [0, 0, 0, 0]
    assert result["left"] == [], f"processes left behind: {[proc.cmdline(p) for p in result['left']]}"
    assert sorted(p.relative_to(ws) for p in ws.rglob("*")) == before
    assert not (ws / ".mam" / "broker").exists()
    assert broker_json("status", ws=ws)["running"] is False


def test_mam_help_imports_no_heavy_module(tmp_path: Path):
    r = subprocess.run(
        [sys.executable, "-X", "importtime", "-m", "mam", "--help"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert r.returncode == 0, r.stderr
    assert "Commands:" in r.stdout
    imported = {
        m.group(1).split(".")[0] for m in re.finditer(r"^import time:\s+\d+ \|\s+\d+ \|\s*([\w.]+)", r.stderr, re.M)
    }
    assert "click" in imported  # the parse worked
    assert imported.isdisjoint(HEAVY), f"`mam --help` imported {sorted(imported & set(HEAVY))}"


def test_mam_version_imports_no_heavy_module(tmp_path: Path):
    code = """
import json, runpy, sys
sys.argv = ["mam", "--version"]
try:
    runpy.run_module("mam", run_name="__main__")
except SystemExit:
    pass
print(json.dumps(sorted({m.split(".")[0] for m in sys.modules})))
"""
    r = subprocess.run(
        [sys.executable, "-c", code], cwd=tmp_path, capture_output=True, text=True, timeout=60, check=False
    )
    assert r.returncode == 0, r.stderr
    assert "mam, version" in r.stdout
    loaded = set(json.loads(r.stdout.strip().splitlines()[-1]))
    assert loaded.isdisjoint(HEAVY)


def _one_job_then_nothing_left(ws: Path, poll) -> int:  # type: ignore[no-untyped-def]
    """A demo session and one job (the node and, unless it runs, the embedded broker start on demand);
    then the session stopped and the workspace's tmux server gone: the node ends. Its pid."""
    made = run_mam("session", "create", "--agent", "demo", "--role", "dev", "--session", "d", ws=ws)
    assert made.returncode == 0, made.stderr
    done = run_mam("job", "delegate", "--target", "d", "--brief", "hello", "--start-deadline", "20", ws=ws)
    assert done.returncode == 0, done.stderr
    node = json.loads((ws / ".mam" / "run" / "node.json").read_text())["pid"]
    assert proc.pid_alive(node) and broker_json("status", ws=ws)["running"] is True
    assert run_mam("session", "stop", "--session", "d", ws=ws).returncode == 0
    subprocess.run(["tmux", "-L", os.environ["MAM_TMUX_SERVER"], "kill-server"], capture_output=True, check=False)
    poll(lambda: gone(node), timeout=30, message="the node did not end once nothing was left")
    return int(node)


def test_a_broker_started_on_demand_ends_with_the_node_once_nothing_is_left(ws: Path, poll):
    _one_job_then_nothing_left(ws, poll)
    status = broker_json("status", ws=ws)
    pid = json.loads((ws / ".mam" / "broker" / "broker.json").read_text()).get("pid")
    assert status["running"] is False and pid is None, status  # stopped by the node as it ended
    assert "stopped the embedded broker" in (ws / ".mam" / "run" / "node.log").read_text()


def test_a_broker_started_with_broker_start_outlives_the_node(ws: Path, poll):
    pid = broker_json("start", ws=ws)["pid"]
    _one_job_then_nothing_left(ws, poll)
    assert broker_json("status", ws=ws)["pid"] == pid and proc.pid_alive(int(str(pid)))
