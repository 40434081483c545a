"""`mam board`: compare-and-set under 20 concurrent writer processes, watchers in two workspaces
sharing a real broker and topic prefix, and a forged write on the broker rejected."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import threading
import uuid
from pathlib import Path

import pytest

from mam.board.message import BoardMessage, Keys
from mam.broker.endpoint import BrokerEndpoint
from mam.bus.mqtt import MqttClient
from mam.bus.topics import Topics
from mam.settings import load_settings
from mam.store import board as table
from mam.store.registry import Registry
from mam.workspace import Workspace
from tests.helpers.mamcli import MAM, mam

WORKERS = 20

# One writer process: read the key, write value + 1 at the version it read, retry on a stale version
# until its one increment is in; print the version it wrote (and how many times it lost the race).
WORKER = textwrap.dedent(
    """
    import json, sys
    from pathlib import Path
    from mam.board import store
    from mam.errors import StaleVersion
    from mam.settings import load_settings
    from mam.store.registry import Registry
    from mam.workspace import Workspace

    ws = Workspace(Path(sys.argv[1]))
    settings = load_settings(env_file=ws.env_file)
    registry = Registry(ws)
    lost = 0
    while True:
        entry = store.get(registry, "counter")
        try:
            out = store.write(ws, settings, registry, "counter", str(int(entry.value) + 1),
                              writer=f"worker-{sys.argv[2]}", if_version=entry.version)
        except StaleVersion:
            lost += 1
            continue
        print(json.dumps({"version": out.entry.version, "lost": lost, "published": out.published}))
        break
    """
)


def _board_env(broker, monkeypatch) -> dict[str, str]:
    """Settings shared by every workspace of the test: the broker, one topic prefix, one secret."""
    env = {
        **broker.env(),
        "MAM_TOPIC_PREFIX": f"t-{uuid.uuid4().hex[:10]}",
        "MAM_DISPATCH_SECRET": "board-secret-" + uuid.uuid4().hex,
    }
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    return env


@pytest.fixture
def board_env(mosquitto_broker, monkeypatch):
    return _board_env(mosquitto_broker, monkeypatch)


@pytest.fixture
def shared_broker_env(broker, monkeypatch):
    """The same, on `broker` (the double; amqtt and Mosquitto for a test marked `real_brokers`)."""
    return _board_env(broker, monkeypatch)


def _workspace(tmp_path: Path, name: str) -> Workspace:
    root = tmp_path / name
    root.mkdir()
    return Workspace(root)


def test_twenty_concurrent_compare_and_set_increments_lose_no_update(tmp_path, board_env, poll):
    ws = _workspace(tmp_path, "ws")
    mam("-w", str(ws.root), "board", "list", check=True)
    watcher, watched, watch_err = _spawn_watch(ws, tmp_path, "watch", WORKERS + 1)
    poll(lambda: "watching" in watch_err.read_text(), timeout=30, message=watch_err.read_text)
    first = mam("-w", str(ws.root), "board", "set", "counter", "0", "--json", check=True)
    assert json.loads(first.stdout)["version"] == 1
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", WORKER, str(ws.root), str(i)],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for i in range(WORKERS)
    ]
    try:
        results = []
        for p in procs:
            out, err = p.communicate(timeout=240)
            assert p.returncode == 0, err
            results.append(json.loads(out))
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.wait()
    # Every worker's increment landed at a version of its own: 2..21, none twice, none missing.
    assert sorted(r["version"] for r in results) == list(range(2, WORKERS + 2))
    assert all(r["published"] for r in results)
    got = json.loads(mam("-w", str(ws.root), "board", "get", "counter", "--json", check=True).stdout)
    assert (got["version"], got["value"]) == (WORKERS + 1, str(WORKERS))  # a lost update leaves value < 20
    registry = Registry(ws)
    with registry.read() as conn:
        audit = table.audit(conn, "counter")
    registry.close()
    assert [(a["version"], a["value"]) for a in audit] == [(v, str(v - 1)) for v in range(1, WORKERS + 2)]
    assert {a["writer"] for a in audit[1:]} == {f"worker-{i}" for i in range(WORKERS)}
    # The watcher saw every write, in version order (writers publish under the board lock).
    try:
        assert watcher.wait(60) == 0, watch_err.read_text()
    finally:
        if watcher.poll() is None:
            watcher.kill()
            watcher.wait()
    seen = [json.loads(line) for line in watched.read_text().splitlines()]
    assert [(m["version"], m["value"]) for m in seen] == [(v, str(v - 1)) for v in range(1, WORKERS + 2)]


def test_stale_version_exits_5_and_writes_nothing(tmp_path, board_env):
    ws = _workspace(tmp_path, "ws")
    w = ["-w", str(ws.root), "board"]
    # Looking at a workspace with no board creates nothing.
    assert mam(*w, "get", "plan/step").returncode == 5
    assert mam(*w, "list", "--json", check=True).stdout.strip() == "[]"
    assert not ws.state.exists()
    mam(*w, "set", "plan/step", "one", check=True)
    mam(*w, "set", "plan/step", "two", "--if-version", "1", check=True)
    stale = mam(*w, "set", "plan/step", "three", "--if-version", "1")
    assert stale.returncode == 5, stale.stderr
    assert "version 2" in stale.stderr
    assert mam(*w, "delete", "plan/step", "--if-version", "1").returncode == 5
    assert mam(*w, "set", "plan/step", "x", "--if-version", "0").returncode == 5  # 0: only if absent
    got = json.loads(mam(*w, "get", "plan/step", "--json", check=True).stdout)
    assert set(got) == {"key", "value", "version", "writer", "ts"}
    assert (got["value"], got["version"]) == ("two", 2)
    registry = Registry(ws)
    with registry.read() as conn:
        assert len(table.audit(conn)) == 2
    registry.close()
    for bad in (["set", "Bad", "v"], ["set", "k" * 201, "v"], ["get", "a b"], ["list", "--prefix", "A"]):
        proc = mam(*w, *bad)
        assert proc.returncode == 2, (bad, proc.stderr)
    assert mam(*w, "set", "big", "x" * (64 * 1024 + 1)).returncode == 2
    assert mam(*w, "get", "big").returncode == 5
    listed = json.loads(mam(*w, "list", "--prefix", "plan/", "--json", check=True).stdout)
    assert [e["key"] for e in listed] == ["plan/step"]


def _spawn_watch(
    ws: Workspace, tmp_path: Path, name: str, count: int, *extra: str
) -> tuple[subprocess.Popen[bytes], Path, Path]:
    out, err = tmp_path / f"{name}.out", tmp_path / f"{name}.err"
    proc = subprocess.Popen(
        [MAM, "-w", str(ws.root), "board", "watch", "--json", "--count", str(count), "--timeout", "120", *extra],
        stdout=out.open("wb"),
        stderr=err.open("wb"),
        env=os.environ.copy(),
    )
    return proc, out, err


@pytest.mark.real_brokers  # the job path on amqtt and Mosquitto, not only the double
def test_watcher_in_another_workspace_sees_every_write_and_rejects_a_forgery(tmp_path, shared_broker_env, poll):
    board_env = shared_broker_env
    origin, other = _workspace(tmp_path, "origin"), _workspace(tmp_path, "other")
    mam("-w", str(origin.root), "board", "list", check=True)  # both registries exist before the watchers start
    mam("-w", str(other.root), "board", "list", check=True)
    watchers = {name: _spawn_watch(ws, tmp_path, name, 4) for name, ws in (("here", origin), ("there", other))}
    try:
        for _proc, _out, err in watchers.values():
            poll(lambda err=err: "watching" in err.read_text(), timeout=30, message=lambda err=err: err.read_text())
        w = ["-w", str(origin.root), "board"]
        mam(*w, "set", "notes/a", "first", check=True)
        mam(*w, "set", "notes/b", "second\x1b[31m", check=True)
        mam(*w, "delete", "notes/a", check=True)
        # A forgery on the broker: well-formed, for a real key, signed with a key that is not the board's.
        topics = Topics(board_env["MAM_TOPIC_PREFIX"])
        forged = BoardMessage(origin.slug, "notes/b", "forged", 99, "mallory", 1).encode("not-the-secret")
        endpoint = BrokerEndpoint(host=board_env["MQTT_BROKER"], port=int(board_env["MQTT_PORT"]))
        with MqttClient(endpoint, client_id=f"forger-{uuid.uuid4().hex[:6]}").connect(5) as client:
            client.publish(topics.board(origin.slug, "notes/b"), forged, qos=1, retain=True)
        for _proc, _out, err in watchers.values():
            poll(lambda err=err: "rejected" in err.read_text(), timeout=30, message=lambda err=err: err.read_text())
        mam(*w, "set", "notes/b", "third", check=True)
        for proc, _out, _err in watchers.values():
            assert proc.wait(60) == 0
    finally:
        for proc, _out, _err in watchers.values():
            if proc.poll() is None:
                proc.kill()
                proc.wait()
    expected = [("notes/a", 1, "first", False), ("notes/b", 1, "second\x1b[31m", False), ("notes/a", 2, "", True)]
    expected.append(("notes/b", 2, "third", False))
    for name, ws in (("here", origin), ("there", other)):
        _proc, out, err = watchers[name]
        lines = [json.loads(line) for line in out.read_text().splitlines()]
        assert [(m["key"], m["version"], m["value"], m["deleted"]) for m in lines] == expected, name
        assert {(m["board"], m["remote"]) for m in lines} == {(origin.slug, name == "there")}
        assert "bad_signature" in err.read_text()
        logged = [json.loads(line) for line in (ws.state / "board-rejected.log").read_text().splitlines()]
        assert [r["reason"] for r in logged] == ["bad_signature"]
    # The other workspace's watch wrote nothing to its own board.
    assert json.loads(mam("-w", str(other.root), "board", "list", "--json", check=True).stdout) == []


def test_only_a_session_created_with_board_may_use_it(workspace, board_env, poll):
    w = ["-w", str(workspace.root)]
    for name, extra in (("scribe", ["--board"]), ("plain", [])):
        mam(*w, "session", "create", "--agent", "demo", "--role", "worker", "--session", name, *extra, check=True)
    try:
        rows = {r["name"]: r for r in json.loads(mam(*w, "session", "status", "--json", check=True).stdout)}
        assert (rows["scribe"]["board"], rows["plain"]["board"]) == (True, False)
        as_scribe = mam(*w, "board", "set", "k", "v", "--json", env={"MAM_SESSION": "scribe"}, check=True)
        assert json.loads(as_scribe.stdout)["writer"] == "scribe"
        refused = mam(*w, "board", "get", "k", env={"MAM_SESSION": "plain"})
        assert refused.returncode == 2 and "--board" in refused.stderr
        assert mam(*w, "board", "set", "k", "w", env={"MAM_SESSION": "plain"}).returncode == 2
        assert json.loads(mam(*w, "board", "get", "k", "--json", check=True).stdout)["version"] == 1
    finally:
        for name in ("scribe", "plain"):
            mam(*w, "session", "stop", "--session", name)


def test_workspaces_of_one_user_check_each_other_without_a_shared_secret(tmp_path, mosquitto_broker, poll, monkeypatch):
    """No MAM_DISPATCH_SECRET: each workspace signs with its own 0600 key, which a watcher of the
    same user reads from the writing workspace's folder; a key no one else could have planted."""
    prefix = f"t-{uuid.uuid4().hex[:10]}"
    for key, value in {**mosquitto_broker.env(), "MAM_TOPIC_PREFIX": prefix}.items():
        monkeypatch.setenv(key, value)
    origin, other, planted = (_workspace(tmp_path, name) for name in ("origin", "other", "planted"))
    mam("-w", str(other.root), "board", "list", check=True)
    watcher, out, err = _spawn_watch(other, tmp_path, "there", 2, "--prefix", "k")
    try:
        poll(lambda: "watching" in err.read_text(), timeout=30, message=err.read_text)
        mam("-w", str(origin.root), "board", "set", "k", "one", check=True)
        own_key = (origin.state / "board-secret").read_text().strip()
        assert (origin.state / "board-secret").stat().st_mode & 0o777 == 0o600
        assert not (other.state / "board-secret").exists()  # watching made no key
        # A key of this user in another folder (its slug is not the board's), and one others may read.
        mam("-w", str(planted.root), "board", "set", "x", "y", check=True)
        planted_key = (planted.state / "board-secret").read_text().strip()
        topics, topic = Topics(prefix), Topics(prefix).board(origin.slug, "k")
        forgeries = [
            BoardMessage(origin.slug, "k", "wrong key", 7, "m", 1, origin=str(origin.root)).encode("x" * 64),
            BoardMessage(origin.slug, "k", "other slug", 8, "m", 1, origin=str(planted.root)).encode(planted_key),
            BoardMessage(origin.slug, "k", "relative", 9, "m", 1, origin="origin").encode(own_key),
        ]
        endpoint = BrokerEndpoint(host=mosquitto_broker.host, port=mosquitto_broker.port)
        with MqttClient(endpoint, client_id=f"forger-{uuid.uuid4().hex[:6]}").connect(5) as client:
            for payload in forgeries:
                client.publish(topic, payload, qos=1)
            assert topics.board(origin.slug, "k") == topic
        poll(lambda: err.read_text().count("rejected") == 3, timeout=30, message=err.read_text)
        mam("-w", str(origin.root), "board", "set", "k", "two", check=True)
        assert watcher.wait(60) == 0, err.read_text()
    finally:
        if watcher.poll() is None:
            watcher.kill()
            watcher.wait()
    seen = [json.loads(line) for line in out.read_text().splitlines()]
    assert [(m["key"], m["value"], m["version"], m["remote"]) for m in seen] == [
        ("k", "one", 1, True),
        ("k", "two", 2, True),
    ]
    rejected = [json.loads(line)["reason"] for line in (other.state / "board-rejected.log").read_text().splitlines()]
    assert rejected == ["bad_signature"] * 3


def _retained(board_env: dict[str, str], topic: str) -> bytes:
    """What the broker holds retained on `topic`, read as any broker user reads it."""
    got: list[bytes] = []
    came = threading.Event()

    def on_message(_topic: str, payload: bytes, _retained: bool) -> None:
        got.append(payload)
        came.set()

    endpoint = BrokerEndpoint(host=board_env["MQTT_BROKER"], port=int(board_env["MQTT_PORT"]))
    with MqttClient(endpoint, client_id=f"reader-{uuid.uuid4().hex[:6]}").connect(5) as client:
        client.subscribe(topic, on_message)
        assert came.wait(10), f"nothing retained on {topic}"
    return got[-1]


def _watched(ws: Workspace, seconds: int) -> list[tuple[str, int, str]]:
    proc = mam("-w", str(ws.root), "board", "watch", "--json", "--timeout", str(seconds), check=True)
    return [(m["key"], m["version"], m["value"]) for m in map(json.loads, proc.stdout.splitlines())]


def test_an_old_write_replayed_as_retained_is_never_shown_as_the_latest(tmp_path, board_env, poll):
    """Issue 39, item 5: a broker user re-published an old signed v1 as retained after v2; watchers started
    afterwards, in the board's workspace and in another, showed v1 as current while the registry said v2."""
    origin, other = _workspace(tmp_path, "origin"), _workspace(tmp_path, "other")
    mam("-w", str(other.root), "board", "list", check=True)
    topic = Topics(board_env["MAM_TOPIC_PREFIX"]).board(origin.slug, "plan")
    mam("-w", str(origin.root), "board", "set", "plan", "v1", check=True)
    old = _retained(board_env, topic)
    mam("-w", str(origin.root), "board", "set", "plan", "v2", check=True)
    node = subprocess.Popen([MAM, "-w", str(origin.root), "node"], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        poll(lambda: mam("-w", str(origin.root), "node", "status").returncode == 0, timeout=30)
        endpoint = BrokerEndpoint(host=board_env["MQTT_BROKER"], port=int(board_env["MQTT_PORT"]))
        with MqttClient(endpoint, client_id=f"replayer-{uuid.uuid4().hex[:6]}").connect(5) as client:
            client.publish(topic, old, qos=1, retain=True)
        there = _watched(other, 6)  # another workspace: the current value within a few seconds
        assert there and there[-1] == ("plan", 2, "v2"), there
        here = _watched(origin, 3)  # the board's own: never older than its registry
        assert here == [("plan", 2, "v2")], here
        # The node put the current write back as the retained one.
        assert (
            BoardMessage.open(
                topic,
                _retained(board_env, topic),
                keys=Keys(load_settings()),
                topics=Topics(board_env["MAM_TOPIC_PREFIX"]),
            ).version
            == 2
        )
    finally:
        mam("-w", str(origin.root), "node", "stop")
        _out, err = node.communicate(timeout=60)
    assert b"the broker held an older or unverifiable copy of plan: published v2 again" in err, err[-2000:]
