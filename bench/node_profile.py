"""Where the node's CPU goes per job: cProfile of every thread of a node serving `--jobs` delegations.

Usage: python bench/node_profile.py [--jobs 20] [--top 30] [--sort tottime|cumulative] [--out FILE]

A temporary workspace with one demo session (private tmux server and broker, as bench/_support.py
makes them); a node started by hand in a child interpreter with a cProfile per thread, timed by
each thread's own CPU clock (`time.thread_time_ns`: waiting costs nothing), then one untimed
warm-up job and `--jobs` jobs through `mam job delegate --json` (the demo agent's `mam event`
commands are served by the same node), then `mam node stop`. Prints the merged profile, per job
(the profiler's own overhead inflates every number; compare rows, not totals against other
benchmarks). `--out` keeps the raw pstats file. Linux only.
"""

from __future__ import annotations

import argparse
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

sys.path.append(str(Path(__file__).resolve().parents[1]))  # for `bench._support`

from bench import _support as support  # noqa: E402


def serve(workspace: str, out: str) -> int:
    """Run a node for `workspace` with every thread profiled; write the merged stats to `out`."""
    from mam.node.server import serve_node

    profilers: list[cProfile.Profile] = []
    lock = threading.Lock()

    def start(*_args: object) -> None:
        prof = cProfile.Profile(time.thread_time_ns, 1e-9)
        with lock:
            profilers.append(prof)
        prof.enable()  # replaces this hook for the rest of the thread

    threading.setprofile(start)
    first = cProfile.Profile(time.thread_time_ns, 1e-9)
    profilers.append(first)
    first.enable()
    try:
        return serve_node(["--workspace", workspace])
    finally:
        first.disable()
        threading.setprofile(None)  # type: ignore[arg-type]
        with lock:
            stats = pstats.Stats(*profilers)
        stats.dump_stats(out)


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


def run(jobs: int, top: int, sort: str, out: Path | None) -> str:
    with support.demo_workspace("mam-bench-node-profile-", "mosquitto") as bench:
        prof = bench.root / "node.prof"
        node = subprocess.Popen(
            [str(support.venv_python()), __file__, "--serve", str(bench.ws.root), "--prof", str(prof)],
            env=bench.env,
            cwd=bench.ws.root,
            stdout=subprocess.DEVNULL,
            stderr=open(bench.root / "node.err", "wb"),  # noqa: SIM115 (the child holds it)
        )
        try:
            if not serving(bench.ws.root, node.pid, 60):
                raise RuntimeError("the profiled node did not start: " + (bench.root / "node.err").read_text()[-800:])
            argv = ["job", "delegate", "--target", f"tmux:{support.DEMO_SESSION}", "--json", "--brief"]
            support.run_mam([*argv, "warm-up"], bench.env, bench.ws.root)
            t0 = time.monotonic()
            for i in range(jobs):
                support.run_mam([*argv, f"profiled job {i}"], bench.env, bench.ws.root)
            wall = time.monotonic() - t0
            support.wait_heartbeaters_gone(bench.ws)
            support.run_mam(["node", "stop"], bench.env, bench.ws.root)
            node.wait(60)
        finally:
            if node.poll() is None:
                node.terminate()
                node.wait(30)
        if out is not None:
            out.write_bytes(prof.read_bytes())
        text = io.StringIO()
        stats = pstats.Stats(str(prof), stream=text)
        total = stats.total_tt  # type: ignore[attr-defined]
        text.write(
            f"{jobs} jobs (+1 warm-up) in {wall:.1f} s; node CPU under the profiler {total:.2f} s in all, "
            f"{1000 * total / (jobs + 1):.1f} ms per job (start-up included)\n"
        )
        stats.strip_dirs().sort_stats(sort).print_stats(top)
        return text.getvalue()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--jobs", type=int, default=20)
    parser.add_argument("--top", type=int, default=30)
    parser.add_argument("--sort", choices=("tottime", "cumulative"), default="cumulative")
    parser.add_argument("--out", type=Path, default=None, help="keep the pstats file here")
    parser.add_argument("--serve", help=argparse.SUPPRESS)
    parser.add_argument("--prof", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.serve:
        return serve(args.serve, args.prof)
    if not support.have_tmux("node_profile"):
        return 2
    os.environ.pop("MAM_NODE", None)
    print(run(args.jobs, args.top, args.sort, args.out))
    return 0


if __name__ == "__main__":
    sys.exit(main())
