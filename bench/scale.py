"""Scale run: 10, 50 and 100 demo-agent sessions in one workspace on one Mosquitto, short jobs
delegated concurrently (one delegating thread per session), with a monitor running.

Prints, per scale point: jobs per minute, dispatch-to-`started` latency p50/p99, events per
second, the monitor's CPU, memory per session, lost or stuck jobs, final states the orchestrator's
shared connection still had unacked when it closed, and when an observer saw each final state;
with --plot writes a PNG of latency and throughput against sessions. Baseline for the ratios: the
first point. By default each session takes its next job as soon as its last one ends (closed loop:
every session busy, the machine saturated, so the latency is mostly the wait for a core); with
--rate the jobs are offered at a fixed rate instead (open loop), which measures the latency of a
machine that keeps up.

    .venv/bin/python bench/scale.py                       # 10, 50, 100 sessions; 1,000 jobs at 100
    .venv/bin/python bench/scale.py --sessions 10,20 --jobs-per-session 3 --json
    .venv/bin/python bench/scale.py --sessions 500 --jobs-per-session 5 --create-parallel 4   # 2,500 jobs
    .venv/bin/python bench/scale.py --sessions 100 --rate 8   # open loop: 8 jobs/s offered, round robin
    .venv/bin/python bench/scale.py --plot docs/scale.png
    .venv/bin/python bench/scale.py --replot rows.txt --plot docs/scale-500.png   # rows printed by earlier runs
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
import threading
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from bench._support import kill_tmux, node_cpu_s, node_pid, wait_node  # noqa: E402
from mam.bus.envelope import Envelope  # noqa: E402
from mam.bus.topics import Topics  # noqa: E402
from mam.errors import DecodeError  # noqa: E402
from mam.jobs.delegate import DelegateRequest, delegate  # noqa: E402
from mam.jobs.record import read_audit  # noqa: E402
from mam.settings import load_settings  # noqa: E402
from mam.store.registry import Registry  # noqa: E402
from mam.workspace import Workspace  # noqa: E402
from tests.helpers.brokers import start_mosquitto  # noqa: E402

MAM = str(Path(sys.executable).parent / "mam")


def rss_kb(pid: int) -> int:
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1])
    except OSError:
        pass
    return 0


def cpu_s(pid: int) -> float:
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            fields = f.read().rsplit(b")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    except (OSError, IndexError, ValueError):
        return 0.0


def children_cpu_s() -> float:
    import resource

    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


def pct(values: list[float], q: float) -> float:
    if not values:
        return float("nan")
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(q * (len(ordered) - 1))))]


def run_point(
    sessions: int,
    jobs_per_session: int,
    broker_env: dict[str, str],
    *,
    heartbeat: float,
    create_parallel: int = 1,
    dump: list[dict[str, Any]] | None = None,
    via: str = "library",
    rate: float = 0.0,
) -> dict[str, Any]:
    root = Path(tempfile.mkdtemp(prefix=f"mam-scale-{sessions}-"))
    ws = Workspace(root)
    home = root / ".home"
    home.mkdir()
    tmux = f"mam-scale-{uuid.uuid4().hex[:8]}"
    env = {k: v for k, v in os.environ.items() if not k.startswith(("MQTT_", "MAM_", "TMUX"))}
    env.update(broker_env)
    env.update(
        {
            "MAM_WORKSPACE": str(root),
            "MAM_TMUX_SERVER": tmux,
            "HOME": str(home),
            "MAM_POLL_S": "0.1",
            "MAM_TOPIC_PREFIX": f"mam/scale-{uuid.uuid4().hex[:6]}",
        }
    )
    settings = load_settings(env_file=None, environ=env)
    names = [f"s{i:03d}" for i in range(sessions)]
    monitor = None
    try:
        t0 = time.monotonic()

        def create(name: str) -> None:
            done = subprocess.run(
                [MAM, "session", "create", "--agent", "demo", "--role", "dev", "--session", name],
                env=env,
                capture_output=True,
                text=True,
            )
            if done.returncode != 0:
                raise RuntimeError(f"create {name}: {done.stderr}")

        create(names[0])  # alone: it starts the tmux server
        with ThreadPoolExecutor(max(1, create_parallel)) as pool:
            list(pool.map(create, names[1:]))
        created_s = time.monotonic() - t0
        reg = Registry(ws)
        pane_pids = [r.pane_pid for r in reg.sessions() if r.pane_pid]
        reg.close()
        monitor = subprocess.Popen(
            [MAM, "monitor", "--subscribe", "--interval", "2"],
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        cpu0 = cpu_s(monitor.pid)
        outcomes: list[tuple[str, str, int]] = []
        errors: list[str] = []
        lock = threading.Lock()
        from mam.bus.connect import open_client

        shared = open_client(
            settings, ws, role="scale-orchestrator", timeout=30
        )  # one connection for every wrapper thread
        # An observer on its own connection, as a runner or `mam top` would be: when each job's
        # retained final state reaches it, after the wrapper published it (the envelope's ts).
        seen: dict[str, float] = {}
        observer = open_client(settings, ws, role="scale-observer", timeout=30)

        def on_state(topic: str, payload: bytes, retained: bool) -> None:
            try:
                env = Envelope.decode(payload)
            except DecodeError:
                return
            with lock:
                seen.setdefault(env.job, time.time() - env.ts / 1000)

        observer.subscribe(Topics.of(settings, ws).all_states(), on_state, timeout=30)
        start = time.monotonic()  # set again when the threads start; read by pace()
        behind: list[float] = []  # with a rate: how late each job was dispatched after its turn
        index = {name: i for i, name in enumerate(names)}

        def pace(name: str, j: int) -> None:
            """With a rate, wait for this job's turn: the k-th job of the run is offered k/rate seconds in."""
            if rate <= 0:
                return
            due = start + (j * sessions + index[name]) / rate
            wait = due - time.monotonic()
            if wait > 0:
                time.sleep(wait)
            with lock:
                behind.append(max(0.0, -wait))

        def cli_worker(name: str, paced: bool = True) -> None:
            for j in range(jobs_per_session):
                if paced:
                    pace(name, j)
                argv = [MAM, "job", "delegate", "--target", f"tmux:{name}", "--brief", f"scale job {j}", "--json"]
                argv += ["--start-deadline", "120", "--heartbeat", str(heartbeat), "--timeout", "600"]
                done = subprocess.run([*argv, "--dispatch-wait", "600"], env=env, capture_output=True, text=True)
                try:
                    out = json.loads(done.stdout)
                except ValueError:
                    with lock:
                        errors.append(f"{name} job {j}: exit {done.returncode}: {done.stderr.strip()[-300:]}")
                    continue
                with lock:
                    outcomes.append((str(out["id"]), str(out["state"]), int(out["exit_code"])))

        def worker(name: str) -> None:
            if via == "cli":
                cli_worker(name)
                return
            registry = Registry(ws)
            try:
                for j in range(jobs_per_session):
                    pace(name, j)
                    try:
                        out = delegate(
                            DelegateRequest(
                                target=f"tmux:{name}",
                                brief=f"scale job {j}",
                                start_deadline_s=120,
                                heartbeat_s=heartbeat,
                                timeout_s=600,
                                dispatch_wait_s=600,
                            ),
                            ws=ws,
                            settings=settings,
                            registry=registry,
                            client=shared,
                        )
                    except Exception as e:  # counted, and the next job still runs
                        with lock:
                            errors.append(f"{name} job {j}: {type(e).__name__}: {e}")
                        continue
                    with lock:
                        outcomes.append((out.job_id, out.state, out.exit_code))
            finally:
                registry.close()

        threads = [threading.Thread(target=worker, args=(n,)) for n in names]
        warmup = 0
        if via == "cli":  # the first delegations start the node: let it serve the run
            cli_worker(names[0], paced=False)
            warmup = len(outcomes)
            outcomes.clear()
            wait_node(ws.root)
        node0 = node_cpu_s(ws.root)
        children0 = children_cpu_s()
        wrapper_cpu0 = time.process_time()
        start = time.monotonic()  # read by pace() in the threads
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        wall = time.monotonic() - start
        wrapper_cpu = time.process_time() - wrapper_cpu0
        node_cpu = node_cpu_s(ws.root) - node0
        if via == "cli":  # the `mam job delegate` clients, and the node (the attempts, the served `mam event`s)
            wrapper_cpu = children_cpu_s() - children0 + node_cpu
        flush_t0 = time.monotonic()
        unacked = shared.flush(60)  # the final states' publishes are not waited for by the wrappers
        flush_s = time.monotonic() - flush_t0
        shared.close()
        deadline = time.monotonic() + 30
        while len(seen) < len(outcomes) and time.monotonic() < deadline:
            time.sleep(0.1)
        observer.close()
        state_delays = list(seen.values())
        monitor_cpu = cpu_s(monitor.pid) - cpu0
        memory = [rss_kb(p) for p in pane_pids]
        node_rss = rss_kb(node_pid(ws.root)) if node_pid(ws.root) else 0
        latencies, events = [], 0
        for job_id, _state, _code in outcomes:
            lines = read_audit(ws, job_id)
            claim = next(
                (
                    line["input"]["at"]
                    for line in lines
                    if line["kind"] == "input" and line["input"]["input"] == "claim"
                ),
                None,
            )
            started = next(
                (
                    line["input"]["at"]
                    for line in lines
                    if line["kind"] == "input" and line["input"].get("type") == "started"
                ),
                None,
            )
            events += sum(1 for line in lines if line["kind"] == "input" and line["input"]["input"] == "event")
            if claim is not None and started is not None:
                latencies.append((started - claim) / 1000)
                if dump is not None:
                    injected = next((line["ts_ms"] for line in lines if line["kind"] == "injected"), None)
                    signed = next(
                        (
                            line["input"].get("ts")
                            for line in lines
                            if line["kind"] == "input" and line["input"].get("type") == "started"
                        ),
                        None,
                    )
                    dump.append(
                        {"job": job_id, "claim": claim, "injected": injected, "signed": signed, "started": started}
                    )
        reg = Registry(ws)
        with reg.read() as conn:
            stuck = conn.execute(
                "SELECT COUNT(*) FROM jobs WHERE state IN ('pending','delivering','delivered','running')"
            ).fetchone()[0]
            registered = conn.execute("SELECT COUNT(*) FROM jobs").fetchone()[0]
        reg.close()
        completed = sum(1 for _j, state, _c in outcomes if state == "completed")
        ended: dict[str, int] = {}
        for _j, state, code in outcomes:
            ended[f"{state}/{code}"] = ended.get(f"{state}/{code}", 0) + 1
        return {
            "sessions": sessions,
            "jobs": len(outcomes),
            "completed": completed,
            "ended": ended,
            "registered": registered,
            "wrapper_errors": errors[:5],
            "wrapper_error_count": len(errors),
            "lost": sessions * jobs_per_session - (registered - warmup),
            "stuck_open": stuck,
            "wall_s": round(wall, 2),
            "create_s": round(created_s, 2),
            "jobs_per_min": round(len(outcomes) / wall * 60, 1),
            "offered_per_s": rate or None,
            "dispatch_behind_p99_s": round(pct(behind, 0.99), 3) if behind else None,
            "started_p50_s": round(pct(latencies, 0.5), 3),
            "started_p99_s": round(pct(latencies, 0.99), 3),
            "events_per_s": round(events / wall, 1),
            "monitor_cpu_s": round(monitor_cpu, 2),
            "monitor_cpu_pct": round(100 * monitor_cpu / wall, 2),
            "wrappers_cpu_s": round(wrapper_cpu, 2),
            "wrappers_cpu_per_job_ms": round(1000 * wrapper_cpu / max(1, len(outcomes)), 1),
            "rss_per_session_mb": round(statistics.mean(memory) / 1024, 1) if memory else 0.0,
            "node_cpu_per_job_ms": round(1000 * node_cpu / max(1, len(outcomes)), 1),
            "node_rss_mb": round(node_rss / 1024, 1),
            "state_unacked": unacked,
            "state_flush_s": round(flush_s, 2),
            "states_seen": len(seen),
            "state_seen_p50_s": round(pct(state_delays, 0.5), 3),
            "state_seen_p99_s": round(pct(state_delays, 0.99), 3),
            "loadavg": " ".join(f"{x:.1f}" for x in os.getloadavg()),
        }
    finally:
        if monitor is not None and monitor.poll() is None:
            monitor.terminate()
            monitor.wait(15)
        kill_tmux(tmux)
        shutil.rmtree(root, ignore_errors=True)


def plot(rows: list[dict[str, Any]], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    xs = [r["sessions"] for r in rows]
    fig, left = plt.subplots(figsize=(7, 4))
    left.plot(xs, [r["started_p50_s"] for r in rows], "o-", label="dispatch to started p50 (s)")
    left.plot(xs, [r["started_p99_s"] for r in rows], "s--", label="dispatch to started p99 (s)")
    left.set_xlabel("demo sessions in one workspace")
    left.set_ylabel("latency (s)")
    left.set_ylim(0, max(r["started_p99_s"] for r in rows) * 1.15)
    right = left.twinx()
    right.plot(xs, [r["jobs_per_min"] for r in rows], "^-", color="tab:green", label="jobs per minute")
    right.set_ylabel("jobs per minute")
    right.set_ylim(0, max(r["jobs_per_min"] for r in rows) * 1.15)
    lines = left.get_legend_handles_labels()[0] + right.get_legend_handles_labels()[0]
    labels = left.get_legend_handles_labels()[1] + right.get_legend_handles_labels()[1]
    left.legend(lines, labels, loc="upper left", fontsize=8)
    left.set_title("mam scale run (2 cores, Mosquitto)")
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sessions", default="10,50,100", help="comma-separated scale points")
    parser.add_argument("--jobs-per-session", type=int, default=10)
    parser.add_argument(
        "--heartbeat", type=float, default=30.0, help="heartbeat N asked of the agents (K x N is the liveness deadline)"
    )
    parser.add_argument(
        "--plot", type=Path, default=None, help="write a PNG of latency and throughput against sessions"
    )
    parser.add_argument(
        "--create-parallel", type=int, default=1, help="sessions created at once (set-up only; 4 makes 500 bearable)"
    )
    parser.add_argument(
        "--rate",
        type=float,
        default=0.0,
        help="offer jobs at this many per second in all (open loop, round robin over the sessions) instead of "
        "each session taking its next job as soon as the last one ends (closed loop, the default)",
    )
    parser.add_argument("--json", action="store_true")
    parser.add_argument(
        "--via",
        choices=("library", "cli"),
        default="library",
        help="library: every job a delegate() call in this process, on one shared MQTT connection (default); "
        "cli: every job a `mam job delegate` process, as skill scripts run it (a client of the workspace's node, "
        "which runs the job; MAM_NODE=0 in the environment: in the process itself)",
    )
    parser.add_argument(
        "--dump",
        type=Path,
        default=None,
        help="write each job's claim, injected, signed-started and taken-started times (ms) here, a JSON line each",
    )
    parser.add_argument(
        "--replot",
        type=Path,
        default=None,
        help="only draw --plot from a file of rows this script printed (one JSON object per line)",
    )
    args = parser.parse_args(argv)
    if args.replot:
        rows = [json.loads(line) for line in args.replot.read_text().splitlines() if line.startswith("{")]
        plot(rows, args.plot or Path("scale.png"))
        return 0
    broker_dir = Path(tempfile.mkdtemp(prefix="mam-scale-broker-"))
    broker = start_mosquitto(broker_dir)
    rows = []
    try:
        for n in [int(x) for x in args.sessions.split(",")]:
            dumped: list[dict[str, Any]] | None = [] if args.dump else None
            row = run_point(
                n,
                args.jobs_per_session,
                broker.env(),
                heartbeat=args.heartbeat,
                create_parallel=args.create_parallel,
                dump=dumped,
                via=args.via,
                rate=args.rate,
            )
            if args.dump and dumped is not None:
                with open(args.dump, "a", encoding="utf-8") as f:
                    f.writelines(json.dumps({"sessions": n, **d}) + "\n" for d in dumped)
            rows.append(row)
            if not args.json:
                print(json.dumps(row), flush=True)
    finally:
        broker.stop()
        shutil.rmtree(broker_dir, ignore_errors=True)
    base = rows[0]
    for r in rows:
        r["jobs_per_min_vs_first"] = (
            round(r["jobs_per_min"] / base["jobs_per_min"], 2) if base["jobs_per_min"] else None
        )
        r["p50_vs_first"] = round(r["started_p50_s"] / base["started_p50_s"], 2) if base["started_p50_s"] else None
    if args.plot:
        plot(rows, args.plot)
    if args.json:
        print(json.dumps(rows, indent=2))
    else:
        print(
            f"{'sessions':>8} {'jobs':>5} {'lost':>4} {'stuck':>5} {'jobs/min':>8} {'p50 s':>6} {'p99 s':>6} "
            f"{'ev/s':>6} {'mon cpu%':>8} {'MB/sess':>7} {'unacked':>7} {'state p99':>9}"
        )
        for r in rows:
            print(
                f"{r['sessions']:>8} {r['jobs']:>5} {r['lost']:>4} {r['stuck_open']:>5} {r['jobs_per_min']:>8} "
                f"{r['started_p50_s']:>6} "
                f"{r['started_p99_s']:>6} {r['events_per_s']:>6} {r['monitor_cpu_pct']:>8} "
                f"{r['rss_per_session_mb']:>7} {r['state_unacked']:>7} {r['state_seen_p99_s']:>9}"
            )
    ok = all(
        r["lost"] == 0 and r["stuck_open"] == 0 and r["wrapper_error_count"] == 0 and r["state_unacked"] == 0
        for r in rows
    )
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
