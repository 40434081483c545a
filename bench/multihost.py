"""Many hosts on one backplane: a 3-node NATS cluster and agent hosts, each in its own network namespace.

    sudo .venv/bin/python bench/multihost.py --hosts 7 --sessions 500 --jobs 2500 --plot docs/multihost.png

Three broker hosts run the cluster (nats-server's MQTT listener, JetStream, stream_replicas 3); agent host h1 is the
origin, h2..hN each run a named node with demo-agent sessions (tests/helpers/multihost.py). Every job is a
`mam job delegate --target remote:HOST/SESSION` on the origin. Three phases:

1. capacity: as many jobs at once as there are sessions, for a fifth of the jobs: completed jobs per second;
2. load: jobs offered at 80 % of that rate, for two fifths: dispatch -> started p50/p99 (the origin's record,
   `started_ms - created_ms`);
3. faults: the rest at half the rate, each working 2 s, while a broker host is killed (-9), an agent host is cut
   off (its link down) for longer than the liveness window and then joined again, and the origin's node is
   killed (-9). The failover time is the gap in a running job's events at the origin across the broker kill.

Then every job is judged (tests/helpers/multihost.judge): none lost (each exit code is its record's, a final
state), none typed twice (each nonce in the agents' conversations at most once, a completed job's exactly once),
and no record changed after its delegate returned. Exit 1 on any violation. Needs root for the namespaces.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import statistics
import sys
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:
    sys.path.append(str(REPO))

from tests.helpers import netns  # noqa: E402
from tests.helpers.multihost import Delegation, Driver, World, judge, start_world  # noqa: E402


def pct(values: list[float], q: float) -> float:
    if not values:
        return float("nan")
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q / 100 * len(ordered)))]


def offer(driver: Driver, count: int, rate: float) -> list[Delegation]:
    """`count` jobs at `rate` per second (open loop: a late one is not made up by a burst)."""
    start = time.monotonic()
    jobs = []
    for i in range(count):
        delay = start + i / rate - time.monotonic()
        if delay > 0:
            time.sleep(delay)
        jobs.append(driver.submit())
    return jobs


def wait_done(driver: Driver, jobs: list[Delegation], timeout: float = 900) -> None:
    ids = {j.id for j in jobs}
    until = time.monotonic() + timeout
    while time.monotonic() < until and len(ids & {j.id for j in driver.done}) < len(ids):
        time.sleep(0.2)


def gaps_across(world: World, jobs: list[Delegation], at_ms: int) -> list[float]:
    """For each job that ran across `at_ms`: the gap (s) between the origin's last event before it and the next."""
    out = []
    for job in jobs:
        started, ended = job.record.get("started_ms") or 0, job.record.get("ended_ms") or 0
        if not (started and started < at_ms < ended):
            continue
        times = sorted(  # when the origin recorded each event it accepted (an audit transition of input "event")
            int(line["ts_ms"])
            for line in world.origin.mam_json("job", "log", job.id)
            if line.get("kind") == "input" and (line.get("input") or {}).get("input") == "event"
        )
        before = [t for t in times if t <= at_ms]
        after = [t for t in times if t > at_ms]
        if before and after:
            out.append((after[0] - before[-1]) / 1000)
    return out


def faults(world: World, driver: Driver, count: int, rate: float, window_s: float) -> dict[str, Any]:
    marks: dict[str, Any] = {}
    span = count / rate

    def timeline() -> None:
        time.sleep(span * 0.2)
        marks["broker_kill_ms"] = int(time.time() * 1000)
        world.cluster.nodes[1].kill()
        time.sleep(span * 0.2)
        cut = world.runners[-1].label
        marks["cut"], marks["cut_ms"] = cut, int(time.time() * 1000)
        world.net.cut(cut)
        time.sleep(window_s + 10)  # the fault itself: cut off for longer than the liveness window
        world.net.join(cut)
        marks["join_ms"] = int(time.time() * 1000)
        pid = world.origin.node_pid()
        if pid:
            marks["origin_node_kill_ms"] = int(time.time() * 1000)
            os.kill(pid, signal.SIGKILL)

    thread = threading.Thread(target=timeline, daemon=True)
    thread.start()
    jobs = offer(driver, count, rate)
    thread.join()
    marks["jobs"] = jobs
    return marks


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--hosts", type=int, default=7, help="agent hosts (h1, the origin, and runners)")
    p.add_argument("--sessions", type=int, default=500, help="demo sessions over the runner hosts")
    p.add_argument("--jobs", type=int, default=2500)
    p.add_argument("--heartbeat", type=float, default=5.0, help="the jobs' --heartbeat (liveness window K x N)")
    p.add_argument("--plot", type=Path, help="write a PNG of dispatch -> started over the run")
    p.add_argument("--json", type=Path, help="write the figures as JSON")
    p.add_argument("--keep", action="store_true", help="keep the run's folder")
    args = p.parse_args(argv)
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))  # a terminated run still tears its hosts down
    why = netns.available()
    if why:
        print(f"multihost: {why}", file=sys.stderr)
        return 2
    workdir = Path(tempfile.mkdtemp(prefix="mam-multihost-"))
    t0 = time.monotonic()
    world = start_world(workdir, args.hosts, 0)
    try:
        runners = world.runners
        per = [
            args.sessions // len(runners) + (1 if i < args.sessions % len(runners) else 0) for i in range(len(runners))
        ]
        with ThreadPoolExecutor(len(runners)) as pool:
            list(pool.map(lambda hn: hn[0].create_sessions(hn[1]), zip(runners, per, strict=True)))
            list(pool.map(lambda h: h.start_runner(), runners))
        setup_s = time.monotonic() - t0
        print(f"multihost: {args.sessions} sessions on {len(runners)} runner hosts in {setup_s:.0f}s", flush=True)
        window_s = args.heartbeat * 4
        options = ("--heartbeat", str(args.heartbeat), "--start-deadline", "60", "--dispatch-wait", "120")
        driver = Driver(world, options=options)
        n_cap, n_load = args.jobs // 5, args.jobs * 2 // 5
        n_fault = args.jobs - n_cap - n_load
        started = time.monotonic()
        cap_jobs = [driver.submit() for _ in range(n_cap)]
        wait_done(driver, cap_jobs)
        capacity = n_cap / (time.monotonic() - started)
        print(f"multihost: capacity {capacity:.1f} jobs/s", flush=True)
        rate = 0.8 * capacity
        load_jobs = offer(driver, n_load, rate)
        wait_done(driver, load_jobs)
        latency = [
            (j.record["started_ms"] - j.record["created_ms"]) / 1000 for j in load_jobs if j.record.get("started_ms")
        ]
        print(
            f"multihost: at {rate:.1f} jobs/s dispatch->started"
            f" p50 {pct(latency, 50):.3f}s p99 {pct(latency, 99):.3f}s",
            flush=True,
        )
        fault_driver = Driver(world, brief="demo-sleep: 2\ndemo-write: out/{id}.txt :: {id}", options=options)
        marks = faults(world, fault_driver, n_fault, capacity * 0.5, window_s)
        jobs = driver.wait_all() + fault_driver.wait_all()
        verdict = judge(world, jobs)
        gaps = gaps_across(world, marks["jobs"], marks["broker_kill_ms"])
        figures = {
            "hosts": args.hosts,
            "broker_hosts": 3,
            "sessions": args.sessions,
            "jobs": verdict.jobs,
            "completed": verdict.completed,
            "lost": len(verdict.lost),
            "typed_twice": len(verdict.typed_twice),
            "violations": verdict.violations,
            "endings": dict(verdict.endings),
            "capacity_jobs_per_s": round(capacity, 2),
            "offered_jobs_per_s": round(rate, 2),
            "dispatch_started_p50_s": round(pct(latency, 50), 3),
            "dispatch_started_p99_s": round(pct(latency, 99), 3),
            "failover_gap_p50_s": round(statistics.median(gaps), 2) if gaps else None,
            "failover_gap_p99_s": round(pct(gaps, 99), 2) if gaps else None,
            "failover_jobs": len(gaps),
            "cut_host": marks.get("cut"),
            "setup_s": round(setup_s, 1),
            "total_s": round(time.monotonic() - t0, 1),
        }
        print(json.dumps(figures, indent=2))
        figures["refused"] = len(verdict.refused)
        for kind in ("lost", "typed_twice", "untyped_completed", "flipped", "typed_undelivered", "refused"):
            for line in getattr(verdict, kind)[:20]:
                print(f"multihost: {kind}: {line}", file=sys.stderr)
        if args.json:
            args.json.write_text(json.dumps(figures, indent=2) + "\n")
        if args.plot:
            plot(args.plot, load_jobs + marks["jobs"], marks)
        return 1 if verdict.violations else 0
    finally:
        world.close()
        if args.keep:
            print(f"multihost: kept {workdir}", file=sys.stderr)
        else:
            import shutil

            shutil.rmtree(workdir, ignore_errors=True)


def plot(path: Path, jobs: list[Delegation], marks: dict[str, Any]) -> None:
    """dispatch -> started of each job against when it was delegated, the faults marked."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rows = [
        (j.submitted_ms, (j.record["started_ms"] - j.record["created_ms"]) / 1000)
        for j in jobs
        if j.record.get("started_ms")
    ]
    if not rows:
        return
    t0 = min(r[0] for r in rows)
    fig, ax = plt.subplots(figsize=(9, 4))
    ax.scatter([(r[0] - t0) / 1000 for r in rows], [r[1] for r in rows], s=4)
    for key, label in (
        ("broker_kill_ms", "broker host killed"),
        ("cut_ms", "host cut off"),
        ("join_ms", "host back"),
        ("origin_node_kill_ms", "origin node killed"),
    ):
        if key in marks:
            ax.axvline((marks[key] - t0) / 1000, color="red", linestyle="--", linewidth=0.8)
            ax.text((marks[key] - t0) / 1000, ax.get_ylim()[1] * 0.9, label, rotation=90, fontsize=7)
    ax.set_xlabel("seconds into the run")
    ax.set_ylabel("dispatch -> started (s)")
    ax.set_yscale("log")
    fig.tight_layout()
    fig.savefig(path, dpi=110)


if __name__ == "__main__":
    sys.exit(main())
