"""MQTT_BROKER as a list of brokers: parsed and checked in the settings, the first that answers is used,
the next one when the connection is lost (what was not acknowledged is sent again there), and
`mam config`, `mam doctor`, `mam broker status` name the list and the one in use. Real Mosquittos."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from mam.broker.endpoint import configured_endpoint
from mam.bus.mqtt import MqttClient
from mam.errors import BrokerError
from mam.settings import BrokerAddress, load_settings, parse_broker_list
from mam.util.poll import wait_for
from tests.helpers.brokers import free_port, start_mosquitto


def run_mam(*args: str, ws: Path, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "mam", *args],
        cwd=ws,
        env={**os.environ, "MAM_WORKSPACE": str(ws), "HOME": str(ws), **env},
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def test_a_list_parses_in_order_with_the_default_port():
    assert parse_broker_list(" a.example , b:1884,[::1]:9, [fe80::1]", 1883) == (
        BrokerAddress("a.example", 1883),
        BrokerAddress("b", 1884),
        BrokerAddress("::1", 9),
        BrokerAddress("fe80::1", 1883),
    )
    assert str(BrokerAddress("::1", 9)) == "[::1]:9"
    assert parse_broker_list("", 1883) == ()
    s = load_settings(environ={"MQTT_BROKER": "n1,n2:2000", "MQTT_PORT": "1999"})
    assert [str(a) for a in s.brokers] == ["n1:1999", "n2:2000"]
    ep = configured_endpoint(s)
    assert (
        ep is not None
        and (ep.host, ep.port) == ("n1", 1999)
        and [str(a) for a in ep.addresses]
        == [
            "n1:1999",
            "n2:2000",
        ]
    )


@pytest.mark.parametrize(
    ("value", "says"),
    [
        ("a,,b", "an empty entry"),
        ("a,", "an empty entry"),
        ("a:0", "the port must be 1-65535"),
        ("a:http", "the port must be 1-65535"),
        ("mqtt://a", "without a scheme"),
        ("::1", "put an IPv6 address in brackets"),
        ("[::1", "an IPv6 address goes in brackets"),
        ("a b", "a host is a name or an address"),
        ("a:1883,a", "is listed twice"),
    ],
)
def test_a_bad_entry_is_a_one_line_config_error_exit_2(tmp_path, value, says):
    r = run_mam("config", ws=tmp_path, env={"MQTT_BROKER": value})
    assert r.returncode == 2, r.stderr
    assert r.stderr.count("\n") == 1 and "MQTT_BROKER" in r.stderr and says in r.stderr, r.stderr
    assert r.stdout == "" and not (tmp_path / ".mam").exists()


def test_the_client_takes_the_first_that_answers_and_moves_on_when_it_is_lost(tmp_path):
    for d in ("a", "b"):
        (tmp_path / d).mkdir()
    a, b = start_mosquitto(tmp_path / "a"), start_mosquitto(tmp_path / "b")
    dead = free_port()
    try:
        s = load_settings(environ={"MQTT_BROKER": f"127.0.0.1:{dead},127.0.0.1:{a.port},localhost:{b.port}"})
        ep = configured_endpoint(s)
        assert ep is not None
        got: list[bytes] = []
        arrived = threading.Event()

        def on_message(_t: str, payload: bytes, _r: bool) -> None:
            got.append(payload)
            arrived.set()

        with MqttClient(ep).connect(5) as client:
            assert client.address == BrokerAddress("127.0.0.1", a.port)  # the unreachable first one is skipped
            client.subscribe("t/list", on_message)
            a.kill()
            # handed over while the connection is down: paho keeps it and sends it to the next broker
            client.publish_nowait("t/list", b"after the switch")
            wait_for(
                lambda: client.connected and client.address == BrokerAddress("localhost", b.port),
                timeout=15,
                message=lambda: f"still on {client.address}, connected={client.connected}",
            )
            assert client.flush(10) == 0  # acknowledged by b
            assert arrived.wait(10), "the subscription was not made again on the next broker"
            assert got == [b"after the switch"]
    finally:
        a.stop()
        b.stop()


def test_config_doctor_and_broker_status_name_the_list_and_the_one_in_use(tmp_path):
    ws = tmp_path / "ws"
    ws.mkdir()
    live = start_mosquitto(tmp_path)
    dead = free_port()
    env = {"MQTT_BROKER": f"127.0.0.1:{dead},127.0.0.1:{live.port}"}
    try:
        status = run_mam("broker", "status", "--json", ws=ws, env=env)
        assert status.returncode == 0, status.stderr
        shown = json.loads(status.stdout)
        assert shown["in_use"] == f"127.0.0.1:{live.port}" and shown["problem"] is None
        assert [(b["broker"], b["reachable"], b["in_use"]) for b in shown["brokers"]] == [
            (f"127.0.0.1:{dead}", False, False),
            (f"127.0.0.1:{live.port}", True, True),
        ]
        text = run_mam("broker", "status", ws=ws, env=env).stdout
        assert f"127.0.0.1:{dead} (not reachable), 127.0.0.1:{live.port} (in use)" in text
        config = json.loads(run_mam("config", "--json", ws=ws, env=env).stdout)
        assert config["broker_in_use"] == f"127.0.0.1:{live.port}"
        assert [b["broker"] for b in config["brokers"]] == [f"127.0.0.1:{dead}", f"127.0.0.1:{live.port}"]
        assert f"127.0.0.1:{live.port} (in use)" in run_mam("config", ws=ws, env=env).stdout
        doctor = json.loads(run_mam("doctor", "--json", ws=ws, env=env).stdout)
        check = next(c for c in doctor["checks"] if c["name"] == "broker")
        assert check["status"] == "ok" and f"127.0.0.1:{live.port} (in use)" in check["detail"]
        live.kill()
        gone = json.loads(run_mam("broker", "status", "--json", ws=ws, env=env).stdout)
        assert gone["in_use"] is None and "cannot connect" in gone["problem"]
        doctor = json.loads(run_mam("doctor", "--json", ws=ws, env=env).stdout)
        assert next(c for c in doctor["checks"] if c["name"] == "broker")["status"] == "fail"
    finally:
        live.stop()


def test_a_broker_that_refuses_as_unavailable_is_left_for_the_next(tmp_path):
    """A node that is up but not ready answers CONNACK "Server unavailable": the client moves on at once."""
    import socket

    listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    listener.bind(("127.0.0.1", 0))
    listener.listen(8)
    stop = threading.Event()

    def refuse() -> None:
        listener.settimeout(0.2)
        while not stop.is_set():
            try:
                conn, _ = listener.accept()
            except OSError:
                continue
            with conn:
                conn.recv(1024)
                conn.sendall(b"\x20\x02\x00\x03")  # CONNACK, return code 3: server unavailable

    thread = threading.Thread(target=refuse, daemon=True)
    thread.start()
    live = start_mosquitto(tmp_path)
    try:
        refusing = listener.getsockname()[1]
        ep = configured_endpoint(load_settings(environ={"MQTT_BROKER": f"127.0.0.1:{refusing},127.0.0.1:{live.port}"}))
        assert ep is not None
        with MqttClient(ep).connect(5) as client:
            assert client.address == BrokerAddress("127.0.0.1", live.port)
        alone = configured_endpoint(load_settings(environ={"MQTT_BROKER": f"127.0.0.1:{refusing}"}))
        assert alone is not None
        with pytest.raises(BrokerError, match=f"MQTT broker 127.0.0.1:{refusing} refused an anonymous client"):
            MqttClient(alone).connect(5)
    finally:
        stop.set()
        thread.join(5)
        listener.close()
        live.stop()
