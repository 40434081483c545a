"""Where the node's CPU goes per job: each of its threads' CPU by what it ran, or a cProfile of them.

Usage: python bench/node_profile.py [--jobs 40] [--work-s 0.05] [--profile [--top 30] [--sort tottime|cumulative]
                                    [--only delegate] [--out FILE]] [--json]

A temporary workspace with one demo session (private tmux server and broker, as bench/_support.py
makes them), a node started by hand in a child interpreter, three untimed warm-up jobs, then `--jobs`
jobs through `mam job delegate --json`, each with `--work-s` of agent work (the demo agent's
`mam event started`, `progress` and `completed` are served by the same node), then `mam node stop`.

Default: no profiler. Every thread of the node adds its CPU time (`time.thread_time`, exact: waiting costs
nothing) to what it ran: a request thread to its command (`job delegate`, `event started`, ...), any
other thread to its name (the heartbeats, the wake relays, the caller watchers). Prints, per job, the
node's whole CPU (`time.process_time`, its long-lived threads included: the broker connection's, the
monitor's), the CPU of its children (the tmux clients it reaped, and those still running: its tmux control
clients), and each row.

`--profile`: a cProfile per request thread instead (`--only`: of the operations whose name holds that text:
`delegate`, `event started`...),
timed by each thread's CPU clock; the profiler's own overhead inflates every number (compare rows,
not totals against other benchmarks). `--out` keeps the pstats file. Linux only.
"""

from __future__ import annotations

import argparse
import collections
import cProfile
import io
import json
import os
import pstats
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

sys.path.append(str(Path(__file__).resolve().parents[1]))  # for `bench._support`

from bench import _support as support  # noqa: E402

WARM_UP = 3


def serve(workspace: str, out: str, profile: str | None) -> int:
    """Run a node for `workspace`, counting each thread's CPU by what it ran; `profile`: also cProfile the
    request threads whose command holds that text. Writes the counts (and the pstats file) to `out` each
    second and at the end."""
    import mam.node.server as server
    import mam.node.service as service

    lock = threading.Lock()
    cpu: collections.Counter[str] = collections.Counter()
    threads: collections.Counter[str] = collections.Counter()
    profiles: list[cProfile.Profile] = []
    plain_run = threading.Thread.run

    def run(self: threading.Thread) -> None:
        t0 = time.thread_time()
        try:
            plain_run(self)
        finally:
            name = "heartbeats" if self.name.startswith("mam-heartbeat-") else self.name
            with lock:
                cpu[name] += time.thread_time() - t0
                threads[name] += 1

    plain_run_op = service.Service.run

    def run_op(self: service.Service, op: str, args: dict[str, Any], env: Any, reply: Any) -> Any:
        name = threading.current_thread().name = f"{op} {args.get('type', '')}".strip()
        if profile is None or profile not in name:
            return plain_run_op(self, op, args, env, reply)
        prof = cProfile.Profile(time.thread_time_ns, 1e-9)
        try:
            return prof.runcall(plain_run_op, self, op, args, env, reply)
        finally:
            with lock:
                profiles.append(prof)

    def dump() -> None:
        with lock:
            counts = {"cpu": dict(cpu), "threads": dict(threads)}
            if profiles:
                pstats.Stats(*profiles).dump_stats(out + ".prof")
        kids = os.times()
        live = 0.0  # the children still running (the tmux control clients): their CPU so far
        for entry in Path("/proc").iterdir():
            try:
                fields = (entry / "stat").read_bytes().rpartition(b")")[2].split() if entry.name.isdigit() else []
            except OSError:
                continue
            if fields and int(fields[1]) == os.getpid():
                live += (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
        counts |= {"process": time.process_time(), "children": kids.children_user + kids.children_system + live}
        Path(out + ".tmp").write_text(json.dumps(counts))
        os.replace(out + ".tmp", out)

    def every_second() -> None:
        while True:
            time.sleep(1)
            dump()

    threading.Thread.run = run  # type: ignore[method-assign]
    service.Service.run = run_op  # type: ignore[method-assign]
    threading.Thread(target=every_second, name="bench-dump", daemon=True).start()
    try:
        return server.serve_node(["--workspace", workspace])
    finally:
        dump()


def serving(root: Path, pid: int, timeout: float) -> bool:
    """Until the node `pid` serves `root` (its node.json and socket written), or `timeout`."""
    run_dir = root / ".mam" / "run"
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            if json.loads((run_dir / "node.json").read_text())["pid"] == pid and (run_dir / "node.sock").exists():
                return True
        except (OSError, ValueError, KeyError):
            pass
        time.sleep(0.05)
    return False


def counts_now(path: Path, timeout: float = 10) -> dict[str, Any]:
    """The node's counts, once written after this call (the node writes them every second)."""
    start = time.time()
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            if path.stat().st_mtime > start:
                return dict(json.loads(path.read_text()))
        except (OSError, ValueError):
            pass
        time.sleep(0.1)
    raise RuntimeError("the node wrote no counts")


def run(jobs: int, work_s: float, profile: str | None, out: Path | None) -> dict[str, Any]:
    with support.demo_workspace("mam-bench-node-profile-", "mosquitto") as bench:
        counts = bench.root / "counts.json"
        argv = [str(support.venv_python()), __file__, "--serve", str(bench.ws.root), "--counts", str(counts)]
        node = subprocess.Popen(
            [*argv, *(["--profile-only", profile] if profile is not None else [])],
            env=bench.env,
            cwd=bench.ws.root,
            stdout=subprocess.DEVNULL,
            stderr=open(bench.root / "node.err", "wb"),  # noqa: SIM115 (the child holds it)
        )
        try:
            if not serving(bench.ws.root, node.pid, 60):
                raise RuntimeError("the node did not start: " + (bench.root / "node.err").read_text()[-800:])
            delegate = ["job", "delegate", "--target", f"tmux:{support.DEMO_SESSION}", "--json", "--brief"]
            for i in range(WARM_UP):
                support.run_mam([*delegate, f"warm-up {i}\ndemo-sleep: {work_s:g}"], bench.env, bench.ws.root)
            support.wait_heartbeaters_gone(bench.ws)
            before = counts_now(counts)
            t0 = time.monotonic()
            for i in range(jobs):
                done = support.run_mam([*delegate, f"job {i}\ndemo-sleep: {work_s:g}"], bench.env, bench.ws.root)
                if done.returncode != 0:
                    raise RuntimeError(f"job {i} exited {done.returncode}: {done.stderr[-600:]}")
            wall = time.monotonic() - t0
            support.wait_heartbeaters_gone(bench.ws)
            after = counts_now(counts)
            support.run_mam(["node", "stop"], bench.env, bench.ws.root)
            node.wait(60)
        finally:
            if node.poll() is None:
                node.terminate()
                node.wait(30)
        rows = {
            name: (1000 * (after["cpu"][name] - before["cpu"].get(name, 0.0)) / jobs)
            for name in after["cpu"]
            if after["cpu"][name] - before["cpu"].get(name, 0.0) > 0
        }
        result: dict[str, Any] = {
            "jobs": jobs,
            "work_s": work_s,
            "wall_ms_per_job": round(1000 * wall / jobs, 1),
            "node_cpu_ms_per_job": round(1000 * (after["process"] - before["process"]) / jobs, 2),
            "children_cpu_ms_per_job": round(1000 * (after["children"] - before["children"]) / jobs, 2),
            "by_thread_ms_per_job": {k: round(v, 2) for k, v in sorted(rows.items(), key=lambda kv: -kv[1])},
            "threads_per_job": {k: round((after["threads"][k] - before["threads"].get(k, 0)) / jobs, 1) for k in rows},
        }
        prof = Path(str(counts) + ".prof")
        if profile is not None and prof.exists():
            if out is not None:
                out.write_bytes(prof.read_bytes())
            result["profile"] = str(out or "")
            result["_stats"] = prof.read_bytes()
        return result


def text(result: dict[str, Any], top: int, sort: str) -> str:
    lines = [
        f"{result['jobs']} jobs of {result['work_s']:g} s work, {result['wall_ms_per_job']} ms wall each; "
        f"the node's CPU {result['node_cpu_ms_per_job']} ms per job, its children (tmux clients) "
        f"{result['children_cpu_ms_per_job']} ms",
        "per job, by thread (what it ran):",
    ]
    for name, ms in result["by_thread_ms_per_job"].items():
        lines.append(f"  {ms:7.2f} ms  {name}  ({result['threads_per_job'][name]:g} threads)")
    rest = result["node_cpu_ms_per_job"] - sum(result["by_thread_ms_per_job"].values())
    lines.append(f"  {rest:7.2f} ms  the long-lived threads (broker connection, monitor, routines, accept)")
    stats = result.pop("_stats", None)
    if stats is not None:
        tmp = Path(os.environ.get("TMPDIR", "/tmp")) / f"node-profile-{os.getpid()}.prof"
        tmp.write_bytes(stats)
        buf = io.StringIO()
        pstats.Stats(str(tmp), stream=buf).strip_dirs().sort_stats(sort).print_stats(top)
        tmp.unlink()
        lines.append(buf.getvalue())
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--jobs", type=int, default=40)
    parser.add_argument("--work-s", type=float, default=0.05, help="the demo agent's work per job")
    parser.add_argument("--profile", action="store_true", help="cProfile the request threads (inflates the numbers)")
    parser.add_argument("--only", default="", help="with --profile: only commands whose name holds this text")
    parser.add_argument("--top", type=int, default=30)
    parser.add_argument("--sort", choices=("tottime", "cumulative"), default="cumulative")
    parser.add_argument("--out", type=Path, default=None, help="with --profile: keep the pstats file here")
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--serve", help=argparse.SUPPRESS)
    parser.add_argument("--counts", help=argparse.SUPPRESS)
    parser.add_argument("--profile-only", default=None, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.serve:
        return serve(args.serve, args.counts, args.profile_only)
    if not support.have_tmux("node_profile"):
        return 2
    os.environ.pop("MAM_NODE", None)
    result = run(args.jobs, args.work_s, args.only if args.profile else None, args.out)
    if args.json:
        result.pop("_stats", None)
        print(json.dumps(result, indent=2))
    else:
        print(text(result, args.top, args.sort))
    return 0


if __name__ == "__main__":
    sys.exit(main())
