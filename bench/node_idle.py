"""mam's own memory and idle CPU with many idle demo sessions: the node and every other mam process.

Usage: python bench/node_idle.py [--sessions 100] [--seconds 30] [--create-parallel 4]
                                 [--broker mosquitto|amqtt] [--json]

It creates `--sessions` demo-agent sessions in a temporary workspace (a private tmux server, a
private broker, its own HOME), delegates one instant job with `mam job delegate` (which starts the
workspace's node on demand, as a user's first delegation does), waits for its heartbeater to stop,
lets everything settle, then over `--seconds`:

- memory: the resident set (VmRSS) and the proportional set (Pss, shared pages split among their
  users) of the node and of every other mam process of the workspace (any process whose command
  line runs mam, other than the agents), summed and divided by the session count; beside it the
  demo agent's own RSS (median over the sessions) and the tmux server's, neither counted as mam's;
- idle CPU: the node's utime+stime+cutime+cstime growth over the window (from /proc: it runs in its
  own session, nobody's child here), as % of one core, and that of the other mam processes;
- the node's wake-ups: voluntary context switches of all its threads, per minute.

Targets (issue 23): mam's memory <= 3 MB per idle session at 100 sessions, the node's idle CPU
<= 1 % of a core. Cleans up everything it started (the node ends with the tmux server).
Linux only.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

sys.path.append(str(Path(__file__).resolve().parents[1]))  # for `bench._support`

from bench import _cpu as cpu  # noqa: E402
from bench import _support as support  # noqa: E402

MAM = str(support.VENV_BIN / "mam")
SETTLE_S = 5.0
TARGET_MB = 3.0
TARGET_PCT = 1.0


def pss_kb(pid: int) -> int:
    try:
        with open(f"/proc/{pid}/smaps_rollup", encoding="utf-8") as f:
            for line in f:
                if line.startswith("Pss:"):
                    return int(line.split()[1])
    except (OSError, ValueError, IndexError):
        pass
    return 0


def argv_of(pid: int) -> list[str]:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            return [a.decode("utf-8", "replace") for a in f.read().split(b"\0") if a]
    except OSError:
        return []


def in_workspace(pid: int, root: Path) -> bool:
    """Whether the process runs for workspace `root` (MAM_WORKSPACE in its environment, or the
    folder in its command line)."""
    try:
        with open(f"/proc/{pid}/environ", "rb") as f:
            if f"MAM_WORKSPACE={root}".encode() in f.read().split(b"\0"):
                return True
    except OSError:
        return False
    return any(str(root) in a for a in argv_of(pid))


def processes(root: Path, node: int) -> dict[str, list[int]]:
    """The workspace's processes by kind: node, mam (every other mam process), agent (the demo
    agents), other (the tmux server, shells, tmux clients...). The broker is not included."""
    kinds: dict[str, list[int]] = {"node": [], "mam": [], "agent": [], "other": []}
    me = os.getpid()
    for name in os.listdir("/proc"):
        if not name.isdigit() or int(name) in (me, node):
            continue
        pid = int(name)
        if not in_workspace(pid, root):
            continue
        argv = argv_of(pid)
        text = " ".join(argv)
        python = bool(argv) and Path(argv[0]).name.startswith("python")
        if "demo_agent" in text:
            kinds["agent"].append(pid)
        elif python and "mam" in text.replace(str(root), ""):
            kinds["mam"].append(pid)
        else:
            kinds["other"].append(pid)
    if node:
        kinds["node"].append(node)
    return kinds


def switches(pid: int) -> int:
    total = 0
    for task in Path(f"/proc/{pid}/task").iterdir():
        try:
            for line in (task / "status").read_text().splitlines():
                if line.startswith("voluntary_ctxt_switches:"):
                    total += int(line.split()[1])
        except OSError:
            continue
    return total


def measure(sessions: int, seconds: float, create_parallel: int, broker_kind: str) -> dict[str, Any]:
    base = Path(tempfile.mkdtemp(prefix="mam-node-idle-"))
    root = (base / "ws").resolve()
    home = base / "home"
    for d in (root, home / ".config", home / ".local/share", home / ".cache"):
        d.mkdir(parents=True)
    broker = (support.start_amqtt if broker_kind == "amqtt" else support.start_mosquitto)(base)
    tmux = f"mam-node-idle-{uuid.uuid4().hex[:8]}"
    env = support.clean_environ(
        base / "pycache",
        MAM_WORKSPACE=str(root),
        MAM_TMUX_SERVER=tmux,
        MQTT_BROKER=broker.host,
        MQTT_PORT=str(broker.port),
        HOME=str(home),
        XDG_CONFIG_HOME=str(home / ".config"),
        XDG_DATA_HOME=str(home / ".local/share"),
        XDG_CACHE_HOME=str(home / ".cache"),
        SHELL="/bin/sh",
        MAM_DEMO_BEHAVIOUR="ok",
        PATH=os.pathsep.join([str(support.VENV_BIN), os.environ.get("PATH", os.defpath)]),
    )
    names = [f"s{i:03d}" for i in range(sessions)]
    try:
        t0 = time.monotonic()

        def create(name: str) -> None:
            support.run_mam(["session", "create", "--agent", "demo", "--role", "dev", "--session", name], env, root)

        create(names[0])  # alone: it starts the tmux server
        with ThreadPoolExecutor(max(1, create_parallel)) as pool:
            list(pool.map(create, names[1:]))
        created_s = time.monotonic() - t0
        support.run_mam(
            ["job", "delegate", "--target", f"tmux:{names[0]}", "--brief", "node idle bench", "--json"], env, root
        )
        node = support.wait_node(root)
        if not node:
            raise RuntimeError("no node serves the workspace after a delegation")
        from mam.workspace import Workspace

        support.wait_heartbeaters_gone(Workspace(root))
        time.sleep(SETTLE_S)
        kinds = processes(root, node)
        watched = kinds["node"] + kinds["mam"]
        tmux_server = int(
            subprocess.run(
                ["tmux", "-L", tmux, "display-message", "-p", "#{pid}"], capture_output=True, text=True
            ).stdout.strip()
            or 0
        )
        before = {p: cpu.read_proc(p) for p in [*watched, tmux_server, *kinds["agent"]]}
        sw0 = switches(node)
        w0 = time.monotonic()
        time.sleep(seconds)
        wall = time.monotonic() - w0
        sw1 = switches(node)
        after = {p: cpu.read_proc(p) for p in before}
        status = json.loads(support.run_mam(["node", "status", "--json"], env, root).stdout)

        def used(pids: list[int]) -> float:
            total = 0.0
            for p in pids:
                a, b = after.get(p), before.get(p)
                if a is not None and b is not None and a.start == b.start:
                    total += a.total - b.total
            return total

        rss = {p: support.rss_kb(p) for p in [*watched, *kinds["agent"], tmux_server]}
        mam_rss_kb = sum(rss[p] for p in watched)
        mam_pss_kb = sum(pss_kb(p) for p in watched)
        agents = [rss[p] for p in kinds["agent"]]
        return {
            "sessions": sessions,
            "create_s": round(created_s, 1),
            "window_s": round(wall, 1),
            "node_pid": node,
            "node_open_jobs": status.get("open_jobs"),
            "node_rss_mb": round(rss[node] / 1024, 1),
            "other_mam_processes": [" ".join(argv_of(p))[:120] for p in kinds["mam"]],
            "other_mam_rss_mb": round(sum(rss[p] for p in kinds["mam"]) / 1024, 1),
            "mam_rss_per_session_mb": round(mam_rss_kb / 1024 / sessions, 3),
            "mam_pss_per_session_mb": round(mam_pss_kb / 1024 / sessions, 3),
            "demo_agent_rss_median_mb": round(statistics.median(agents) / 1024, 1) if agents else None,
            "demo_agents_seen": len(agents),
            "tmux_server_rss_mb": round(rss.get(tmux_server, 0) / 1024, 1),
            "node_idle_cpu_pct": round(100 * used([node]) / wall, 3),
            "other_mam_idle_cpu_pct": round(100 * used(kinds["mam"]) / wall, 3),
            "tmux_server_idle_cpu_pct": round(100 * used([tmux_server]) / wall, 3),
            "demo_agents_idle_cpu_pct": round(100 * used(kinds["agent"]) / wall, 3),
            "node_wakeups_per_min": round((sw1 - sw0) * 60 / wall, 1),
            "machine": support.machine(),
        }
    finally:
        support.kill_tmux(tmux)
        from mam.workspace import Workspace

        support.wait_heartbeaters_gone(Workspace(root))
        broker.stop()
        shutil.rmtree(base, ignore_errors=True)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sessions", type=int, default=100)
    parser.add_argument("--seconds", type=float, default=30.0, help="the idle window")
    parser.add_argument("--create-parallel", type=int, default=4, help="sessions created at once (set-up only)")
    parser.add_argument("--broker", choices=("mosquitto", "amqtt"), default="mosquitto")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    if args.sessions <= 0 or args.seconds <= 0:
        parser.error("--sessions and --seconds must be positive")
    if not support.have_tmux("node_idle"):
        return 2
    r = measure(args.sessions, args.seconds, args.create_parallel, args.broker)
    if args.json:
        print(json.dumps(r, indent=2))
        return 0
    print(f"{r['sessions']} idle demo sessions, {r['window_s']:g} s window (created in {r['create_s']:g} s)")
    print(
        f"mam's memory per idle session: {r['mam_rss_per_session_mb']:.2f} MB RSS "
        f"({r['mam_pss_per_session_mb']:.2f} MB PSS; target <= {TARGET_MB:g} MB): node {r['node_rss_mb']} MB, "
        f"other mam processes {r['other_mam_rss_mb']} MB {r['other_mam_processes']}"
    )
    print(
        f"beside it, not mam's: demo agent {r['demo_agent_rss_median_mb']} MB each (median of "
        f"{r['demo_agents_seen']}), tmux server {r['tmux_server_rss_mb']} MB"
    )
    print(
        f"idle CPU, % of a core: node {r['node_idle_cpu_pct']:.3f} (target <= {TARGET_PCT:g}), other mam "
        f"{r['other_mam_idle_cpu_pct']:.3f}, tmux server {r['tmux_server_idle_cpu_pct']:.3f}, demo agents "
        f"{r['demo_agents_idle_cpu_pct']:.3f}; node wake-ups {r['node_wakeups_per_min']:g}/min"
    )
    m = r["machine"]
    print(f"{m['date']}; {m['nproc']} cores ({m['cpu']}); Python {m['python']}; load {m['loadavg']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
