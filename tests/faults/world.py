"""The world a fault schedule runs in: a Mosquitto broker, an origin workspace with demo sessions
and a monitor, and a 'remote host' workspace with demo sessions and a runner. With `cluster=True`
the broker is a 3-node NATS cluster and each workspace is a host in a network namespace of its own
(tests/faults/cluster.py). Every process is started and killed through its own handle; nothing is
found by name."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import uuid
from dataclasses import dataclass, field
from pathlib import Path

from mam.store.registry import Registry
from mam.workspace import Workspace
from tests.faults.cluster import Backplane
from tests.helpers import brokers
from tests.helpers.mamcli import MAM
from tests.helpers.tmux import PrivateTmux, private_tmux

SECRET = "fault-suite-dispatch-secret"
TIMING = {"MAM_POLL_S": "0.05", "MAM_HEARTBEAT_K": "4", "MAM_DEMO_SLEEP_S": "1.5"}


@dataclass
class Host:
    name: str
    ws: Workspace
    env: dict[str, str]
    tmux: PrivateTmux
    sessions: list[str]
    argv: list[str] = field(default_factory=list)  # what runs a command on this host (its namespace), or nothing

    def run(self, *args: str, timeout: float = 60) -> subprocess.CompletedProcess[str]:
        return subprocess.run([*self.argv, MAM, *args], env=self.env, capture_output=True, text=True, timeout=timeout)

    def spawn(self, *args: str) -> subprocess.Popen[str]:
        return subprocess.Popen(
            [*self.argv, MAM, *args],
            env=self.env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            start_new_session=True,
        )

    def registry(self) -> Registry:
        return Registry(self.ws)

    def session_row(self, name: str):
        reg = self.registry()
        try:
            return reg.find_session(name)
        finally:
            reg.close()

    def create(self, name: str) -> None:
        proc = self.run("session", "create", "--agent", "demo", "--role", "dev", "--session", name)
        if proc.returncode != 0:
            raise RuntimeError(f"create {name} on {self.name}: {proc.stderr}")

    def capture(self, pane_id: str) -> str:
        return subprocess.run(
            ["tmux", "-L", self.tmux.name, "capture-pane", "-p", "-J", "-S", "-", "-t", pane_id],
            capture_output=True,
            text=True,
        ).stdout


@dataclass
class World:
    root: Path
    broker: brokers.RunningBroker | None  # the Mosquitto broker; None on a cluster
    origin: Host
    remote: Host
    cluster: Backplane | None = None  # the NATS cluster and the hosts' namespaces (`cluster=True`)
    monitor: subprocess.Popen[str] | None = None
    runner: subprocess.Popen[str] | None = None
    spawned: list[subprocess.Popen[str]] = field(default_factory=list)
    wrapper_args: list[str] = field(default_factory=list)  # added to every job's `mam job delegate`

    @classmethod
    def build(
        cls,
        root: Path,
        *,
        local_sessions: int = 6,
        remote_sessions: int = 2,
        extra_env: dict[str, str] | None = None,
        cluster: bool = False,
    ) -> World:
        prefix = f"mam/faults-{uuid.uuid4().hex[:8]}"
        extra = extra_env or {}
        local = [f"a{i}" for i in range(local_sessions)]
        far = [f"b{i}" for i in range(remote_sessions)]
        if cluster:
            # A slow agent works 4 s, so a cut off or a take-over early in a wave finds remote jobs running.
            extra = {"MAM_DEMO_SLEEP_S": "4", **extra}
            plane = Backplane.start(_mkdir(root / "nats"))
            world = cls(
                root,
                None,
                _host(root, "origin", plane.env("origin"), prefix, local, extra, plane.argv("origin")),
                _host(root, "remote", plane.env("remote"), prefix, far, extra, plane.argv("remote")),
                cluster=plane,
            )
        else:
            broker = brokers.start_mosquitto(_mkdir(root / "broker"))
            world = cls(
                root,
                broker,
                _host(root, "origin", broker.env(), prefix, local, extra),
                _host(root, "remote", broker.env(), prefix, far, extra),
            )
        try:
            for host in (world.origin, world.remote):
                for name in host.sessions:
                    host.create(name)
            world.start_monitor()
            world.start_runner()
        except BaseException:
            world.shutdown()
            world.close()
            raise
        return world

    # -- long-running processes ---------------------------------------------------------------
    def start_monitor(self) -> None:
        self.monitor = self.origin.spawn("monitor", "--subscribe", "--interval", "0.3")
        self.spawned.append(self.monitor)

    def start_runner(self) -> None:
        self.runner = self.remote.spawn("runner", "--name", "rf", "--allow-insecure-broker")
        self.spawned.append(self.runner)
        _wait_log(self.remote.ws.state / "runners" / "rf.jsonl", self.runner)

    def alive(self, proc: subprocess.Popen[str] | None) -> bool:
        return proc is not None and proc.poll() is None

    def restore(self) -> None:
        """Bring back whatever a fault took away: broker (every NATS node, the remote host's link), runner, monitor."""
        if self.broker is not None and not self.broker.running:
            self.broker.restart()
        if self.cluster is not None:
            self.cluster.restore()
        if not self.alive(self.runner):
            self.start_runner()
        if not self.alive(self.monitor):
            self.start_monitor()

    def shutdown(self) -> None:
        for proc in self.spawned:
            if proc.poll() is None:
                proc.send_signal(signal.SIGTERM)
        for proc in self.spawned:
            try:
                proc.wait(15)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(5)
            for stream in (proc.stdout, proc.stderr):
                if stream is not None:
                    stream.close()
        for host in (self.origin, self.remote):
            # Each host's node first (started on demand, so not one of `spawned`): one still serving could start
            # the tmux server again after the kill below (a resume in flight), leaving it and its control client.
            host.run("node", "stop", timeout=60)
            host.tmux.kill()
        if self.broker is not None:
            self.broker.stop()
            for host in (self.origin, self.remote):
                subprocess.run([MAM, "broker", "stop"], env=host.env, capture_output=True)
        if self.cluster is not None:
            self.cluster.stop()

    def close(self) -> None:
        """After shutdown() and the check for leftovers: the cluster's namespaces deleted (nothing for Mosquitto)."""
        if self.cluster is not None:
            self.cluster.close()

    def leftovers(self) -> list[str]:
        """Processes whose command line or environment names this world's folder (heartbeaters, agents, wrappers...)."""
        found = []
        me = str(os.getpid())
        for pid in os.listdir("/proc"):
            if not pid.isdigit() or pid == me:
                continue
            try:
                with open(f"/proc/{pid}/cmdline", "rb") as f:
                    cmd = f.read().replace(b"\0", b" ").decode(errors="replace")
                with open(f"/proc/{pid}/environ", "rb") as f:
                    environ = f.read().decode(errors="replace")
                with open(f"/proc/{pid}/stat", "rb") as f:
                    zombie = f.read().rsplit(b")", 1)[1].split()[0] == b"Z"
            except OSError:
                continue
            if (str(self.root) in cmd or str(self.root) in environ) and not zombie:
                found.append(f"{pid}: {cmd[:200]}")
        return found


def _mkdir(path: Path) -> Path:
    path.mkdir(parents=True, exist_ok=True)
    return path


def _host(
    root: Path,
    name: str,
    broker_env: dict[str, str],
    prefix: str,
    sessions: list[str],
    extra: dict[str, str],
    argv: list[str] | None = None,
) -> Host:
    ws_root = _mkdir(root / name / "ws")
    home = _mkdir(root / name / "home")
    tmux = private_tmux()
    env = {
        **os.environ,
        **TIMING,
        **broker_env,
        "MAM_WORKSPACE": str(ws_root),
        "MAM_TMUX_SERVER": tmux.name,
        "HOME": str(home),
        "XDG_CONFIG_HOME": str(home / ".config"),
        "XDG_DATA_HOME": str(home / ".local/share"),
        "MAM_TOPIC_PREFIX": prefix,
        "MAM_DISPATCH_SECRET": SECRET,
        **extra,
    }
    return Host(name, Workspace(ws_root), env, tmux, sessions, list(argv or []))


def _wait_log(path: Path, proc: subprocess.Popen[str]) -> None:
    from mam.util.poll import wait_for

    def started() -> bool:
        if proc.poll() is not None:
            raise RuntimeError(f"runner exited: {proc.stderr.read() if proc.stderr else ''}")
        return path.exists() and any(
            json.loads(line).get("pid") == proc.pid for line in path.read_text().splitlines() if '"started"' in line
        )

    wait_for(started, timeout=20, message="runner did not start")
