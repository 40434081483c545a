"""The fleet view across hosts (issue 24, item 4): `mam status --fleet` on one host sees the nodes of the
others, a runner node killed (SIGKILL) reads `offline` within 30 s and `online` again once restarted; over one
Mosquitto and over a 3-node NATS cluster. Each host is its own workspace, HOME, tmux server and process tree."""

from __future__ import annotations

import json
import signal
import subprocess
import uuid

import pytest

from mam.remote.fleet import LISTEN_S
from tests.remote.test_remote_jobs import INSECURE, runner_started

OFFLINE_WITHIN_S = 30.0  # the bound: a node that dies reads offline within 30 s on another host


def fleet(host) -> list[dict]:
    proc = host.mam("status", "--fleet", "--json", timeout=60)
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)


def node_row(host, name: str) -> dict | None:
    return next((r for r in fleet(host) if r["name"] == name), None)


@pytest.fixture(params=["mosquitto", "nats"])
def fleet_hosts(request, two_hosts):
    """(origin, remote, the runner's extra arguments) on one broker of each kind."""
    if request.param == "mosquitto":
        b = request.getfixturevalue("mosquitto_broker")
        origin, remote = two_hosts(b.env())
        return origin, remote, INSECURE
    from tests.helpers.nats import ORCHESTRATOR, RUNNER

    cluster = request.getfixturevalue("nats_cluster")
    origin, remote = two_hosts(cluster.env(ORCHESTRATOR), cluster.env(RUNNER))
    return origin, remote, []  # the cluster asks for a password: no --allow-insecure-broker


@pytest.mark.slow  # about 12-25 s: started among the first, not last (tests/conftest.py)
def test_a_killed_runner_reads_offline_on_another_host_within_30s_and_online_again_when_back(fleet_hosts, poll):
    origin, remote, extra = fleet_hosts
    name = f"fl-{uuid.uuid4().hex[:6]}"  # the runners' namespace is shared by every test on this broker
    remote.mam("session", "create", "--agent", "demo", "--role", "dev", "--session", "d1", "--json")
    runner = remote.spawn("node", "--name", name, *extra)
    runner_started(remote, poll, name)

    def online() -> dict | None:
        row = node_row(origin, name)
        return row if row is not None and row["state"] == "online" else None

    row = poll(online, timeout=60, message=lambda: f"never online: {fleet(origin)}")
    assert {"name": "d1", "state": "running"} in row["sessions"]
    assert row["host"] and isinstance(row["since_ms"], int) and isinstance(row["last_seen_ms"], int)
    assert origin.mam("node", "status").returncode == 5  # looking started no node on the origin

    runner.send_signal(signal.SIGKILL)
    runner.wait(10)

    def offline() -> dict | None:
        row = node_row(origin, name)
        return row if row is not None and row["state"] == "offline" else None

    # The deadline starts at the kill, and a look tells what it heard by its end, LISTEN_S later: the last
    # look starts LISTEN_S before the bound.
    gone = poll(offline, timeout=OFFLINE_WITHIN_S - LISTEN_S, message=lambda: f"still online: {fleet(origin)}")
    assert gone["offline_by"] in ("will", "silence"), gone

    remote.spawn("node", "--name", name, *extra)  # its earlier life (same host, pid gone) does not block the name
    back = poll(online, timeout=60, message=lambda: f"never back online: {fleet(origin)}")
    assert back["pid"] != gone["pid"] and back["since_ms"] > row["since_ms"]


def test_a_named_node_answers_the_fleet_from_its_table_and_sees_a_goodbye(two_hosts, mosquitto_broker, poll):
    origin, remote = two_hosts(mosquitto_broker.env())
    here, there = f"fo-{uuid.uuid4().hex[:6]}", f"fr-{uuid.uuid4().hex[:6]}"
    origin.spawn("node", "--name", here, *INSECURE)
    runner_started(origin, poll, here)
    remote.mam("session", "create", "--agent", "demo", "--role", "dev", "--session", "d1", "--json")
    runner = remote.spawn("runner", "--name", there, *INSECURE)
    runner_started(remote, poll, there)

    def both_online() -> bool:
        rows = {r["name"]: r["state"] for r in fleet(origin)}
        return rows.get(here) == rows.get(there) == "online"

    poll(both_online, timeout=60, message=lambda: f"not both online: {fleet(origin)}")
    human = origin.mam("status", "--fleet")
    assert human.returncode == 0, human.stderr
    assert f"(from node {here}'s table)" in human.stderr  # the node answered: nothing listened for 4 s
    line = next(x for x in human.stdout.splitlines() if x.startswith(f"{there}  "))
    assert " online since " in line and "sessions: d1 running" in line

    runner.terminate()  # SIGTERM: a clean stop says goodbye
    try:
        runner.wait(30)
    except subprocess.TimeoutExpired:
        runner.kill()
        raise

    def said_goodbye() -> dict | None:
        row = node_row(origin, there)
        return row if row is not None and row["offline_by"] == "goodbye" else None

    gone = poll(said_goodbye, timeout=30, message=lambda: f"no goodbye seen: {fleet(origin)}")
    assert gone["state"] == "offline" and isinstance(gone["since_ms"], int)


def test_the_fleet_view_needs_the_dispatch_secret_and_a_broker(two_hosts, mosquitto_broker):
    origin, _ = two_hosts(mosquitto_broker.env())
    unsigned = origin.mam("status", "--fleet", env={"MAM_DISPATCH_SECRET": ""})
    assert unsigned.returncode == 2 and "MAM_DISPATCH_SECRET" in unsigned.stderr
    nobroker = origin.mam("status", "--fleet", env={"MQTT_BROKER": "127.0.0.1", "MQTT_PORT": "1"})
    assert nobroker.returncode == 3, nobroker.stderr
