"""mam against CAO 2.5.4 (awslabs/cli-agent-orchestrator), on this machine, in one run.

Usage:
    .venv/bin/python bench/vs_cao.py [--runs 30] [--quick] [--json] [--broker mosquitto|amqtt]
                                     [--via skill|cli] [--install user|dev] [--node on|off]
                                     [--python python3] [--cao-venv ~/.cache/mam/cao-venv]

CAO must be installed in its own venv first (never into mam's), made by the same interpreter mam runs on
(`--python`, default python3; the script refuses two different ones):
    python3 -m venv ~/.cache/mam/cao-venv && ~/.cache/mam/cao-venv/bin/pip install cli-agent-orchestrator==2.5.4

Both sides run on that one interpreter: mam's workspace venv is made by it (deploy/install.sh's PYTHON), CAO's
server and its mock agent run in CAO's venv. Which build it is matters more than either side's code on this
machine kind: Debian's /usr/bin/python3 (PGO and LTO) costs both sides 15-30 % less CPU than a default pyenv
build (docs/benchmarks.md); the summary line names the interpreter.

Both sides get the same agent work: 50 ms per job.

- CAO: its own server (`python -m cli_agent_orchestrator.api.main` on a free loopback port, HOME,
  tmux socket dir and PATH private), its own `mock_cli` provider driving bench/cao_mock_agent.py
  (our re-implementation of the mock agent of CAO's test fixtures: 50 ms, then `> MOCK: <line>`).
  A terminal is made with `POST /sessions` (it returns once the agent is idle: create -> ready);
  a delegation is `POST /terminals/run-step` with `reuse_terminal_id`, the substrate behind CAO's
  `handoff` (input, wait for COMPLETED, extract the reply), checked to return our own text.
- mam: installed as a new user installs it (`--install user`, the default: `deploy/install.sh WS`
  makes the workspace's venv with a regular pip install and copies the skills into
  WS/.agents/skills; `--install dev` uses this clone's editable .venv and skills instead), then
  demo-agent sessions made with the skill script `create_session.sh` (which returns once the
  agent is ready), jobs delegated with `delegate_job.sh` (`mam job delegate`, a thin client of the
  workspace's node, which the first delegation starts and which runs the job in a thread) with the
  directive `demo-sleep: 0.05`: the demo agent runs the footer's `mam event started`, works 50 ms and
  runs `mam event completed` (two fresh client processes, each served by the node, and the heartbeat
  the node starts for `started`; the demo agent says `progress` only each second while work is left).
  `--node off` sets MAM_NODE=0: every operation then runs in its own process (the same Service).
  Private tmux server, private HOME, a private broker on a free loopback port (Mosquitto by default;
  `--broker amqtt` is the broker mam embeds). Every job must end `completed` with exit 0.

Measured: create -> ready (median of --runs), one delegation round trip (median of --runs, after
one warm-up), 5 sessions in parallel x --parallel-jobs jobs each (jobs per minute, latency median,
CPU-seconds per job), and idle CPU with 5 agents (both sides idle in the same window).

CPU counts every process of a side, from /proc: CAO's server and everything under it, and its tmux
server with the shells and agents under it; mam's `mam job delegate` clients (reaped by this script:
RUSAGE_CHILDREN), the workspace's node (pid from `.mam/run/node.json`: it runs in its own session,
nobody's child; the growth of its utime+stime+cutime+cstime, so the heartbeaters and tmux clients
it starts and reaps count too, shown apart from its own), its tmux server with the demo agents
and their `mam event` clients (reaped by the agent: its cutime+cstime, shown apart from the
agent's own CPU), any heartbeater still running or
orphaned (this script is made a subreaper so they can be counted) and the broker. The agents count
on both sides (CAO's mock agent, mam's demo agent); "without the agents' own" leaves their own CPU out.
This script's own threads (the HTTP calls to CAO, the subprocess calls) count on neither side.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.request
import uuid
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.append(str(REPO))

from bench import _cpu as cpu  # noqa: E402
from bench import _support as support  # noqa: E402

SKILLS = REPO / "skills"
CREATE_SH = SKILLS / "multi-agent-mux-create" / "scripts" / "create_session.sh"
DELEGATE_SH = SKILLS / "multi-agent-mux-delegate-job" / "scripts" / "delegate_job.sh"
MOCK_AGENT = Path(__file__).resolve().parent / "cao_mock_agent.py"
CAO_VERSION = "2.5.4"
DEMO_AGENT = "demo agent"
AGENTS = (DEMO_AGENT, "mock agent")  # their own CPU (bench/_cpu.py's labels)
NODE = "node"
REAPED = {  # processes whose reaped children's CPU is shown apart (bench/_cpu.py's labels)
    DEMO_AGENT: "mam event clients (reaped by the demo agent)",
    NODE: "the node's children, reaped (heartbeaters, tmux clients)",
}
WORK_S = 0.05


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def median(xs: list[float]) -> float:
    return statistics.median(xs) if xs else float("nan")


# -- CAO ------------------------------------------------------------------------------------------
class Cao:
    """A private CAO server with mock_cli terminals."""

    def __init__(self, root: Path, venv: Path) -> None:
        self.root, self.venv = root, venv
        self.home, self.bin, self.tmuxdir = root / "home", root / "bin", root / "tmux"
        for d in (self.home, self.bin, self.tmuxdir):
            d.mkdir(parents=True)
        shim = self.bin / "mock_cli"  # CAO's provider types `mock_cli --delay-ms 50` into a shell
        shim.write_text(f'#!/bin/sh\nexec {venv / "bin" / "python"} {MOCK_AGENT} "$@"\n')  # CAO's interpreter
        shim.chmod(0o755)
        # The pane's bash is a login shell whose profile resets PATH: put the shim back in front.
        (self.home / ".bashrc").write_text(f'export PATH="{self.bin}:$PATH"\n')
        (self.home / ".bash_profile").write_text(". ~/.bashrc\n")
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.proc: subprocess.Popen[bytes] | None = None
        self.terminals: dict[str, str] = {}  # session name -> terminal id

    def start(self) -> float:
        env = support.clean_environ(
            HOME=str(self.home),
            TMUX_TMPDIR=str(self.tmuxdir),
            PATH=os.pathsep.join([str(self.bin), "/usr/local/bin", "/usr/bin", "/bin"]),
            SHELL="/bin/bash",
            CAO_API_HOST="127.0.0.1",
            CAO_API_PORT=str(self.port),
            CAO_A2A_DISABLED="true",
            OTEL_SDK_DISABLED="true",
            PYTHONUNBUFFERED="1",
        )
        log = open(self.root / "server.log", "ab")  # noqa: SIM115 (kept for the server's life)
        t0 = time.monotonic()
        self.proc = subprocess.Popen(
            [str(self.venv / "bin" / "python"), "-m", "cli_agent_orchestrator.api.main"]
            + ["--host", "127.0.0.1", "--port", str(self.port)],
            env=env,
            cwd=self.root,
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        log.close()
        deadline = t0 + 90
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"cao server exited {self.proc.returncode}: {self._log_tail()}")
            try:
                if self._call("GET", "/health", timeout=1).get("status") == "ok":
                    return time.monotonic() - t0
            except (OSError, ValueError):
                pass
            time.sleep(0.05)
        raise RuntimeError(f"cao server not healthy within 90 s: {self._log_tail()}")

    def _log_tail(self) -> str:
        return (self.root / "server.log").read_text(errors="replace")[-1500:]

    def _call(self, method: str, path: str, body: dict[str, Any] | None = None, timeout: float = 120) -> Any:
        data = json.dumps(body).encode() if body is not None else None
        req = urllib.request.Request(self.url + path, data=data, method=method)
        if data is not None:
            req.add_header("content-type", "application/json")
        with urllib.request.urlopen(req, timeout=timeout) as resp:
            return json.loads(resp.read() or b"null")

    def create(self, name: str) -> float:
        """Create a session with one mock_cli terminal; seconds until CAO answers (it waits for idle)."""
        t0 = time.perf_counter()
        out = self._call("POST", f"/sessions?provider=mock_cli&agent_profile=developer&session_name={name}")
        took = time.perf_counter() - t0
        if out.get("status") not in ("idle", "completed"):
            raise RuntimeError(f"cao terminal {name} not ready: {out}")
        self.terminals[name] = out["id"]
        return took

    def delete(self, name: str) -> None:
        try:
            self._call("DELETE", f"/sessions/{name}", timeout=30)
        except (OSError, urllib.error.HTTPError):
            pass
        self.terminals.pop(name, None)

    def job(self, name: str, text: str) -> float:
        """One delegation to a ready terminal (run-step, reusing it); seconds; checks the reply."""
        body = {
            "provider": "mock_cli",
            "agent": "developer",
            "prompt": text,
            "reuse_terminal_id": self.terminals[name],
            "timeout": 120,
        }
        t0 = time.perf_counter()
        out = self._call("POST", "/terminals/run-step", body)
        took = time.perf_counter() - t0
        if out.get("status") != "completed" or out.get("last_message") != text:
            raise RuntimeError(f"cao run-step on {name} gave {out!r}, not the reply to {text!r}")
        return took

    def tmux_socket(self) -> Path:
        return self.tmuxdir / f"tmux-{os.getuid()}" / "default"

    def roots(self) -> list[int]:
        pids = [self.proc.pid] if self.proc else []
        return pids + _tmux_server_pid(["-S", str(self.tmux_socket())])

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGTERM)  # its own process group (start_new_session)
            try:
                self.proc.wait(15)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait(5)
        if self.tmux_socket().exists():
            subprocess.run(["tmux", "-S", str(self.tmux_socket()), "kill-server"], capture_output=True, timeout=10)


def _tmux_server_pid(sock: list[str]) -> list[int]:
    out = subprocess.run(["tmux", *sock, "display-message", "-p", "#{pid}"], capture_output=True, text=True)
    return [int(out.stdout.strip())] if out.returncode == 0 and out.stdout.strip().isdigit() else []


# -- mam ------------------------------------------------------------------------------------------
class Mam:
    """A throw-away workspace with demo-agent sessions on a private tmux server and broker."""

    def __init__(
        self, root: Path, broker_kind: str, via: str, install: str = "user", node: str = "on", python: str = "python3"
    ) -> None:
        self.root, self.via = root, via
        self.ws = root / "ws"
        home = root / "home"
        for d in (self.ws, home / ".config", home / ".local/share", home / ".cache"):
            d.mkdir(parents=True)
        # "user": mam as a new user has it, `deploy/install.sh WS` (the workspace's own venv with a
        # regular install, the skills copied into WS/.agents/skills); "dev": this clone's .venv
        # (an editable install: each interpreter start pays setuptools' import finder, ~8 ms).
        self.bin, self.skills = support.VENV_BIN, SKILLS
        if install == "user":
            base = support.clean_environ(HOME=str(home), XDG_CACHE_HOME=str(home / ".cache"))
            base["PIP_CACHE_DIR"] = os.environ.get("PIP_CACHE_DIR", str(Path.home() / ".cache" / "pip"))
            base["PYTHON"] = python  # the interpreter that makes the workspace's venv
            done = subprocess.run(
                ["bash", str(REPO / "deploy" / "install.sh"), str(self.ws)], env=base, capture_output=True, text=True
            )
            if done.returncode != 0:
                raise RuntimeError(f"deploy/install.sh exited {done.returncode}: {done.stderr[-800:]}")
            self.bin, self.skills = self.ws / ".venv" / "bin", self.ws / ".agents" / "skills"
        self.broker = (support.start_amqtt if broker_kind == "amqtt" else support.start_mosquitto)(root)
        self.tmux = f"mam-vscao-{uuid.uuid4().hex[:8]}"
        self.env = support.clean_environ(
            root / "pycache",
            MAM_WORKSPACE=str(self.ws),
            MAM_TMUX_SERVER=self.tmux,
            MQTT_BROKER=self.broker.host,
            MQTT_PORT=str(self.broker.port),
            HOME=str(home),
            XDG_CONFIG_HOME=str(home / ".config"),
            XDG_DATA_HOME=str(home / ".local/share"),
            XDG_CACHE_HOME=str(home / ".cache"),
            SHELL="/bin/sh",
            MAM_DEMO_BEHAVIOUR="ok",
            PATH=os.pathsep.join([str(self.bin), os.environ.get("PATH", os.defpath)]),
            **({"MAM_NODE": "0"} if node == "off" else {}),
        )

    def _run(self, argv: list[str], timeout: float = 120) -> subprocess.CompletedProcess[str]:
        return subprocess.run(argv, env=self.env, cwd=self.ws, capture_output=True, text=True, timeout=timeout)

    def _mam(self, *args: str) -> list[str]:
        return [str(self.bin / "mam"), *args]

    def create(self, name: str) -> float:
        args = ["--workspace", str(self.ws), "--agent", "demo", "--role", "dev", "--session", name]
        script = self.skills / CREATE_SH.relative_to(SKILLS)
        argv = ["bash", str(script), *args] if self.via == "skill" else self._mam("session", "create", *args)
        t0 = time.perf_counter()
        done = self._run(argv)
        took = time.perf_counter() - t0
        if done.returncode != 0:
            raise RuntimeError(f"mam session create {name} exited {done.returncode}: {done.stderr[-600:]}")
        return took

    def delete(self, name: str) -> None:
        self._run(self._mam("session", "stop", "--session", name), timeout=60)

    def job(self, name: str, text: str) -> float:
        brief = f"{text}\ndemo-sleep: {WORK_S:g}"
        args = ["--target", f"tmux:{name}", "--brief", brief, "--json"]
        script = self.skills / DELEGATE_SH.relative_to(SKILLS)
        argv = ["bash", str(script), *args] if self.via == "skill" else self._mam("job", "delegate", *args)
        t0 = time.perf_counter()
        done = self._run(argv)
        took = time.perf_counter() - t0
        state = ""
        try:
            state = json.loads(done.stdout).get("state", "")
        except ValueError:
            pass
        if done.returncode != 0 or state != "completed":
            raise RuntimeError(f"mam job on {name} exited {done.returncode} ({state}): {done.stderr[-600:]}")
        return took

    def events_by_type(self) -> dict[str, int]:
        """How many accepted events of each type the jobs of this run have (checked after the run)."""
        from mam.store.registry import Registry
        from mam.workspace import Workspace

        reg = Registry(Workspace(self.ws))
        try:
            with reg.read() as conn:
                rows = conn.execute("SELECT type, COUNT(*) FROM events GROUP BY type").fetchall()
                states = conn.execute("SELECT state, COUNT(*) FROM jobs GROUP BY state").fetchall()
        finally:
            reg.close()
        return {**{f"event {t}": n for t, n in rows}, **{f"job {s}": n for s, n in states}}

    def roots(self) -> list[int]:
        return (
            _tmux_server_pid(["-L", self.tmux]) + [self.broker.proc.pid] + [p for p in [support.node_pid(self.ws)] if p]
        )

    def stop(self) -> None:
        support.kill_tmux(self.tmux)
        from mam.workspace import Workspace

        support.wait_heartbeaters_gone(Workspace(self.ws))
        self.broker.stop()


# -- measuring ------------------------------------------------------------------------------------
class Window:
    """CPU of one side's process trees over a window (see the module docstring). Adopted orphans
    that exit inside the window are reaped at its end and counted from their rusage; those of
    earlier windows are reaped (`settle`) between windows."""

    def __init__(self, side: Cao | Mam, keep: list[int]) -> None:
        self.side, self.keep = side, keep

    def __enter__(self) -> Window:
        self.roots = self.side.roots()  # before the snapshot: finding them runs `tmux`, a child of ours
        self.before = cpu.snapshot()
        self.children0 = cpu.own_children_cpu()
        self.t0 = time.monotonic()
        return self

    def __exit__(self, *exc: object) -> None:
        self.wall = time.monotonic() - self.t0
        after = cpu.snapshot()
        me = os.getpid()
        adopted = [p for p, proc in after.items() if proc.ppid == me and p not in self.before and p not in self.keep]
        each = cpu.per_process(self.before, after, self.roots + adopted)
        # An adopted orphan that has exited (a heartbeater): its stat holds whole clock ticks, which
        # would round a 5 ms process to 0; reaping it gives its rusage to the microsecond instead
        # (and adds it to RUSAGE_CHILDREN, taken out again below).
        reaped = 0.0
        for pid in adopted:
            if after[pid].state == "Z":
                precise = cpu.reap_exact(pid)
                if precise is not None:
                    each[pid] = precise
                    reaped += precise
        self.breakdown: dict[str, float] = {}
        for pid, used in each.items():
            name = cpu.label(pid, after)
            if name in REAPED:  # its own CPU apart from its children's (which it reaped)
                own, reaped_by = cpu.split(self.before, after, pid)
                self.breakdown[REAPED[name]] = self.breakdown.get(REAPED[name], 0.0) + reaped_by
                used = own
            self.breakdown[name] = self.breakdown.get(name, 0.0) + used
        if isinstance(self.side, Mam):  # the `mam job delegate` processes this script ran and reaped
            self.breakdown["mam job delegate (the processes run)"] = cpu.own_children_cpu() - self.children0 - reaped
        self.cpu = sum(self.breakdown.values())
        self.own = self.cpu - sum(self.breakdown.get(k, 0.0) for k in AGENTS)  # every process but the agents'


def settle(keep: list[int]) -> None:
    """Between windows: reap the orphans adopted so far."""
    cpu.reap_orphans(keep)


def parallel(side: Cao | Mam, names: list[str], jobs: int, keep: list[int], tag: str) -> dict[str, float]:
    lat: list[float] = []
    errors: list[str] = []
    lock = threading.Lock()

    def worker(name: str) -> None:
        for j in range(jobs):
            try:
                took = side.job(name, f"{tag} {name} job {j} {uuid.uuid4().hex[:6]}")
            except Exception as e:  # counted; the run goes on
                with lock:
                    errors.append(str(e)[:300])
                continue
            with lock:
                lat.append(took)

    settle(keep)
    with Window(side, keep) as w:
        threads = [threading.Thread(target=worker, args=(n,)) for n in names]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    if errors:
        raise RuntimeError(f"{len(errors)} {tag} jobs failed, first: {errors[0]}")
    return {
        "jobs": len(lat),
        "wall_s": w.wall,
        "jobs_per_min": len(lat) / w.wall * 60,
        "latency_median_s": median(lat),
        "cpu_s": w.cpu,
        "cpu_per_job_s": w.cpu / max(1, len(lat)),
        "own_cpu_per_job_s": w.own / max(1, len(lat)),
        "cpu_per_job_by_process": {k: round(v / max(1, len(lat)), 4) for k, v in sorted(w.breakdown.items())},
    }


def run(args: argparse.Namespace) -> dict[str, Any]:
    if not cpu.become_subreaper():
        print("vs_cao: warning: cannot become a subreaper; daemons' CPU may be missed", file=sys.stderr)
    root = Path(tempfile.mkdtemp(prefix="mam-vscao-"))
    cao = Cao(root / "cao", args.cao_venv) if not args.only or args.only == "cao" else None
    mam = (
        Mam(root / "mam", args.broker, args.via, args.install, args.node, args.python)
        if not args.only or args.only == "mam"
        else None
    )
    sides: dict[str, Cao | Mam] = {k: v for k, v in (("cao", cao), ("mam", mam)) if v is not None}
    keep = [mam.broker.proc.pid] if mam else []
    result: dict[str, Any] = {
        "machine": support.machine() | {"python": args.interpreter},
        "params": vars(args) | {"cao_venv": str(args.cao_venv)},
    }
    res: dict[str, dict[str, Any]] = {k: {} for k in sides}
    loads: list[str] = [result["machine"]["loadavg"]]
    try:
        if cao is not None:
            res["cao"]["server_start_s"] = cao.start()
            keep.append(cao.proc.pid if cao.proc else 0)
        names = [f"w{i}" for i in range(args.parallel_sessions)]
        for side in sides.values():  # the sessions the round trips (the first) and the parallel run use (untimed)
            for name in names:
                side.create(name)
        # create -> ready, interleaved; each new session is removed again at once
        created: dict[str, list[float]] = {k: [] for k in sides}
        for i in range(args.runs):
            for key, side in sides.items():
                created[key].append(side.create(f"c{i}"))
                side.delete(f"c{i}")
        for key in sides:
            res[key]["create_ready_median_s"] = median(created[key])
        loads.append(_load())
        # one delegation round trip, interleaved, after one warm-up each
        trips: dict[str, list[float]] = {k: [] for k in sides}
        for side in sides.values():
            side.job(names[0], f"warm-up {uuid.uuid4().hex[:6]}")
        for i in range(args.runs):
            for key, side in sides.items():
                trips[key].append(side.job(names[0], f"round trip {i} {uuid.uuid4().hex[:6]}"))
        for key in sides:
            res[key]["round_trip_median_s"] = median(trips[key])
            res[key]["round_trip_p90_s"] = sorted(trips[key])[int(0.9 * (len(trips[key]) - 1))]
        loads.append(_load())
        # parallel sessions, one side at a time
        for key, side in sides.items():
            res[key]["parallel"] = parallel(side, names, args.parallel_jobs, keep, key)
            loads.append(_load())
        # idle: both sides at rest over the same window
        time.sleep(2)
        settle(keep)
        windows = {key: Window(side, keep) for key, side in sides.items()}
        for w in windows.values():
            w.__enter__()
        time.sleep(args.idle_s)
        for key, w in windows.items():
            w.__exit__()
            res[key]["idle_cpu_pct"] = 100 * w.cpu / w.wall
            res[key]["idle_own_cpu_pct"] = 100 * w.own / w.wall
            res[key]["idle_cpu_pct_by_process"] = {
                k: round(100 * v / w.wall, 3) for k, v in sorted(w.breakdown.items())
            }
        loads.append(_load())
        if mam is not None:
            res["mam"]["verified"] = mam.events_by_type()
    finally:
        for side in sides.values():
            try:
                side.stop()
            except Exception as e:  # cleaning up the other side still matters
                print(f"vs_cao: cleanup: {e}", file=sys.stderr)
        shutil.rmtree(root, ignore_errors=True)
    result["results"] = res
    result["loadavg_during"] = loads
    return result


def _load() -> str:
    return " ".join(f"{x:.2f}" for x in os.getloadavg())


ROWS = (
    ("create → ready, median", lambda r: r.get("create_ready_median_s"), "{:.2f} s"),
    ("one delegation round trip, median", lambda r: r.get("round_trip_median_s"), "{:.3f} s"),
    ("{n} sessions in parallel, jobs per minute", lambda r: r.get("parallel", {}).get("jobs_per_min"), "{:.0f}"),
    ("{n} sessions in parallel, latency median", lambda r: r.get("parallel", {}).get("latency_median_s"), "{:.2f} s"),
    ("CPU-seconds per job (every process involved)", lambda r: r.get("parallel", {}).get("cpu_per_job_s"), "{:.3f}"),
    (
        "CPU-seconds per job, without the agents' own",
        lambda r: r.get("parallel", {}).get("own_cpu_per_job_s"),
        "{:.3f}",
    ),
    ("idle CPU with {n} agents, % of a core", lambda r: r.get("idle_cpu_pct"), "{:.2f}"),
)


def table(result: dict[str, Any]) -> str:
    res, p = result["results"], result["params"]
    cao, mam = res.get("cao", {}), res.get("mam", {})
    lines = ["| metric | CAO | mam | mam/CAO |", "| --- | --- | --- | --- |"]
    for label, get, fmt in ROWS:
        a, b = get(cao), get(mam)
        ratio = f"{b / a:.2f}" if a and b is not None else "-"
        lines.append(
            f"| {label.format(n=p['parallel_sessions'])} | {fmt.format(a) if a is not None else '-'} | "
            f"{fmt.format(b) if b is not None else '-'} | {ratio} |"
        )
    m = result["machine"]
    lines.append("")
    lines.append(
        f"{m['date']}; {m['nproc']} cores ({m['cpu']}); Python {m['python']}; {m['tmux']}; "
        f"broker {p['broker']}; mam via {p['via']} ({p.get('install', 'dev')} install, node {p.get('node', 'on')}); "
        f"CAO {CAO_VERSION}; "
        f"runs {p['runs']}, "
        f"{p['parallel_sessions']} x {p['parallel_jobs']} jobs, idle {p['idle_s']:g} s"
    )
    lines.append("load average (1/5/15 min) at start and after each phase: " + " | ".join(result["loadavg_during"]))
    for key, r in (("CAO", cao), ("mam", mam)):
        if "parallel" in r:
            parts = ", ".join(f"{k} {v:.3f}" for k, v in r["parallel"]["cpu_per_job_by_process"].items() if v)
            lines.append(f"{key} CPU-s per job by process: {parts}")
        if "idle_cpu_pct_by_process" in r:
            parts = ", ".join(f"{k} {v:.2f}" for k, v in r["idle_cpu_pct_by_process"].items() if v)
            lines.append(f"{key} idle % of a core by process: {parts or 'none'}")
    if "verified" in mam:
        lines.append("mam jobs and events in the registry: " + json.dumps(mam["verified"], sort_keys=True))
    return "\n".join(lines)


def resolve(python: str) -> tuple[str, str] | None:
    """(real path, version) of an interpreter as the interpreter itself says (a pyenv shim is a script)."""
    code = "import os, platform, sys; print(os.path.realpath(sys.executable)); print(platform.python_version())"
    try:
        done = subprocess.run([python, "-c", code], capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired):
        return None
    lines = done.stdout.split()
    return (lines[0], lines[1]) if done.returncode == 0 and len(lines) == 2 else None


def same_interpreter(args: argparse.Namespace) -> str | None:
    """Check both sides will run on one interpreter (args.interpreter set); a message if not."""
    found = resolve(str(support.VENV_BIN / "python") if args.install == "dev" else args.python)
    if found is None:
        return f"--python {args.python}: not an interpreter that runs"
    mine, version = found  # a venv's python resolves to the interpreter that made it
    args.interpreter = f"{version} ({mine})"
    if args.only == "mam":
        return None
    theirs = resolve(str(args.cao_venv / "bin" / "python"))
    cao = theirs[0] if theirs else f"nothing that runs ({args.cao_venv / 'bin' / 'python'})"
    if cao != mine:
        return (
            f"CAO's venv {args.cao_venv} was made by {cao}, mam would run on {mine}: make one with the same "
            f"interpreter ({mine} -m venv DIR && DIR/bin/pip install cli-agent-orchestrator=={CAO_VERSION}) "
            "and pass --cao-venv DIR"
        )
    return None


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=30, help="runs of create -> ready and of the round trip")
    parser.add_argument("--parallel-sessions", type=int, default=5)
    parser.add_argument("--parallel-jobs", type=int, default=30, help="jobs per session in the parallel run")
    parser.add_argument("--idle-s", type=float, default=30.0, help="idle CPU window, seconds")
    parser.add_argument("--quick", action="store_true", help="5 runs, 5 x 6 parallel jobs, 10 s idle window")
    parser.add_argument("--broker", choices=("mosquitto", "amqtt"), default="mosquitto")
    parser.add_argument("--via", choices=("skill", "cli"), default="skill", help="skill scripts or the mam CLI")
    parser.add_argument(
        "--install",
        choices=("user", "dev"),
        default="user",
        help="user: mam installed by deploy/install.sh into the bench workspace, as a new user has it "
        "(default); dev: this clone's editable .venv",
    )
    parser.add_argument(
        "--node", choices=("on", "off"), default="on", help="off: MAM_NODE=0, every mam command in its own process"
    )
    parser.add_argument(
        "--python",
        default=os.environ.get("PYTHON", "python3"),
        help="the interpreter both sides run on: it makes mam's workspace venv, and --cao-venv must have been made "
        "by it (default: $PYTHON, else python3)",
    )
    parser.add_argument("--cao-venv", type=Path, default=Path.home() / ".cache" / "mam" / "cao-venv")
    parser.add_argument("--only", choices=("cao", "mam"), help="measure one side only")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    if args.quick:
        args.runs, args.parallel_jobs, args.idle_s = min(args.runs, 5), min(args.parallel_jobs, 6), 10.0
    if not support.have_tmux("vs_cao"):
        return 2
    if args.only != "mam" and not (args.cao_venv / "bin" / "python").exists():
        print(f"vs_cao: error: no CAO venv at {args.cao_venv} (see --help)", file=sys.stderr)
        return 2
    problem = same_interpreter(args)
    if problem:
        print(f"vs_cao: error: {problem}", file=sys.stderr)
        return 2
    result = run(args)
    print(json.dumps(result, indent=2) if args.json else table(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
