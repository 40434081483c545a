"""The wrapper's own costs, this tree against a baseline tree, in one run (issue 14, parts 2 and 3).

Usage: python bench/wrapper_path.py [--jobs 15] [--broker mosquitto|amqtt] [--baseline DIR] [--idle-s 15]
                                   [--node on|off] [--json]

`--baseline DIR`: a folder holding another mam package (e.g. `git archive main mam | tar -x -C DIR`);
its side runs the same venv with PYTHONPATH=DIR, so only mam's code differs, and with MAM_NODE=0 (a
node drops the caller's PYTHON* variables, so it would run the venv's mam). Without it, this tree
alone. `--node off`: this tree with MAM_NODE=0 too (every command in its own process).

Per side: a temporary workspace (own HOME, private tmux server, private broker, one demo agent), one
untimed warm-up job, then `--jobs` jobs started the way an orchestrator does, through the skill script
(`skills/multi-agent-mux-delegate-job/scripts/delegate_job.sh`, MAM_BIN pointing at the venv's mam).
From each job's audit log (wrapper clock) and the spawn time:

  register   skill script spawned -> job `created` committed
  deliver    `created` -> `injected` (session lookup, turn, liveness check, paste, Enter)
  caller CPU   user+system CPU of the script's process tree (the skill script and the `mam` client;
             with MAM_NODE=0 also the wrapper and the tmux clients it runs; not the agent, its
             `mam event` commands or the broker), from RUSAGE_CHILDREN
  wrapper CPU  the caller's CPU plus what the workspace's node spent over the jobs (the attempt's
             thread with its tmux clients, the `mam event`s it served, the heartbeaters it reaped:
             the growth of the node's utime+stime+cutime+cstime, `.mam/run/node.json`'s pid), the
             mean per job

Then one idle job: the agent acknowledges it and goes silent (`demo-behaviour: silent_after_start`,
no heartbeater, --heartbeat 60 so no deadline comes near); over `--idle-s` seconds the wrapper's
voluntary context switches (each one a wake-up from a sleep; the wrapper is the job's owner: the
node, or the caller with MAM_NODE=0) are counted from /proc, for its main thread and for all its
threads (the node's: its accept loop, the attempt, paho's network thread, the monitor), and given
per minute. Cleans up everything it started. Exits non-zero only on an error.
"""

from __future__ import annotations

import json
import os
import resource
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

sys.path.append(str(Path(__file__).resolve().parents[1]))  # for `bench._support`; mam itself comes from the venv

from bench import _support as support  # noqa: E402

SESSION = support.DEMO_SESSION
SCRIPT = support.REPO / "skills" / "multi-agent-mux-delegate-job" / "scripts" / "delegate_job.sh"


def _children_cpu() -> float:
    ru = resource.getrusage(resource.RUSAGE_CHILDREN)
    return ru.ru_utime + ru.ru_stime


def _argv(brief: str, *extra: str) -> list[str]:
    return ["bash", str(SCRIPT), "--target", f"tmux:{SESSION}", "--brief", brief, "--json", *extra]


def one_job(i: int, env: dict[str, str], ws: Any) -> dict[str, float]:
    from mam.jobs.record import read_audit

    cpu0 = _children_cpu()
    spawned_ms = time.time() * 1000
    proc = subprocess.run(
        _argv(f"Benchmark job {i}: nothing to do, report at once.", "--start-deadline", "30", "--heartbeat", "1"),
        env=env,
        cwd=ws.root,
        capture_output=True,
        text=True,
        timeout=90,
    )
    cpu = _children_cpu() - cpu0
    record = json.loads(proc.stdout or "{}")
    if proc.returncode != 0 or record.get("state") != "completed":
        raise RuntimeError(f"job {i}: exit {proc.returncode} {record.get('reason')}: {proc.stderr.strip()[-400:]}")
    at: dict[str, float] = {}
    for line in read_audit(ws, record["id"]):
        at.setdefault(str(line["kind"]), float(line["ts_ms"]))
    return {
        "register": at["created"] - spawned_ms,
        "deliver": at["injected"] - at["created"],
        "cpu_ms": cpu * 1000,
    }


def _owner(ws: Any, job_id: str) -> int:
    """The pid of the process that owns the job (its wrapper), from the job's record."""
    return int(str(json.loads(ws.job_record(job_id).read_text())["owner"]).split(":")[1])


def _switches(pid: int) -> tuple[int, int]:
    """(voluntary context switches of the main thread, of all threads) of a process."""
    main = total = 0
    for task in Path(f"/proc/{pid}/task").iterdir():
        for line in (task / "status").read_text().splitlines():
            if line.startswith("voluntary_ctxt_switches:"):
                n = int(line.split()[1])
                total += n
                if task.name == str(pid):
                    main = n
    return main, total


def idle_job(env: dict[str, str], ws: Any, seconds: float) -> dict[str, float]:
    from mam.store import jobs as jobs_table
    from mam.store.registry import Registry

    brief = "Benchmark idle job: acknowledge, then nothing.\ndemo-behaviour: silent_after_start"
    argv = _argv(brief, "--start-deadline", "30", "--heartbeat", "60")
    proc = subprocess.Popen(argv, env=env, cwd=ws.root, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    registry = Registry(ws)
    try:
        deadline = time.monotonic() + 30
        job_id = ""
        while time.monotonic() < deadline:
            with registry.read() as conn:
                rows = [r for r in jobs_table.open_jobs(conn) if r.state == "running"]
            if rows:
                job_id = rows[0].id
                break
            time.sleep(0.05)
        if not job_id:
            raise RuntimeError("the idle job never ran")
        time.sleep(0.5)  # let the wrapper settle into its wait
        wrapper = _owner(ws, job_id)  # the node, or the caller itself with MAM_NODE=0
        main0, all0 = _switches(wrapper)
        time.sleep(seconds)
        main1, all1 = _switches(wrapper)
        support.run_mam(["job", "cancel", job_id], env, ws.root)
        proc.communicate(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        registry.close()
    return {
        "main_per_min": (main1 - main0) * 60 / seconds,
        "all_per_min": (all1 - all0) * 60 / seconds,
    }


def side(name: str, pythonpath: str, jobs: int, broker: str, idle_s: float, quiet: bool, node: bool) -> dict[str, Any]:
    saved = os.environ.get("PYTHONPATH")
    if pythonpath:
        os.environ["PYTHONPATH"] = pythonpath
    else:
        os.environ.pop("PYTHONPATH", None)
    try:
        with support.demo_workspace(f"mam-bench-wrapper-{name}-", broker) as bench:
            env = {**bench.env, "MAM_BIN": str(support.VENV_BIN / "mam"), **({} if node else {"MAM_NODE": "0"})}
            one_job(0, env, bench.ws)  # warm-up (it starts the node, unless MAM_NODE=0)
            if node:
                support.wait_node(bench.ws.root)
            rows = []
            served0 = support.node_cpu_s(bench.ws.root)
            for i in range(1, jobs + 1):
                rows.append(one_job(i, env, bench.ws))
                if not quiet:
                    r = rows[-1]
                    print(
                        f"{name:8} job {i:2}: register {r['register']:6.1f} ms  deliver {r['deliver']:6.1f} ms  "
                        f"caller CPU {r['cpu_ms']:6.1f} ms",
                        flush=True,
                    )
            served = (support.node_cpu_s(bench.ws.root) - served0) * 1000 / max(1, jobs)
            idle = idle_job(env, bench.ws, idle_s)
    finally:
        if saved is None:
            os.environ.pop("PYTHONPATH", None)
        else:
            os.environ["PYTHONPATH"] = saved
    med = {k: round(float(support.median([r[k] for r in rows])), 1) for k in ("register", "deliver", "cpu_ms")}
    mean_cpu = sum(r["cpu_ms"] for r in rows) / max(1, len(rows)) + served
    med["wrapper_cpu_ms"] = round(mean_cpu, 1)
    return {"median_ms": med, "idle_wakeups": {k: round(v, 1) for k, v in idle.items()}}


def main(argv: list[str] | None = None) -> int:
    import argparse

    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--jobs", type=int, default=15)
    parser.add_argument("--broker", choices=("mosquitto", "amqtt"), default="mosquitto")
    parser.add_argument("--baseline", default="", help="a folder holding the baseline's mam package")
    parser.add_argument("--idle-s", type=float, default=15.0)
    parser.add_argument("--node", choices=("on", "off"), default="on", help="off: MAM_NODE=0 for this tree too")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    if not support.have_tmux("wrapper_path"):
        return 2
    sides = ([("baseline", str(Path(args.baseline).resolve()))] if args.baseline else []) + [("this", "")]
    results: dict[str, Any] = {}
    try:
        for name, path in sides:
            node = not path and args.node == "on"
            results[name] = side(name, path, args.jobs, args.broker, args.idle_s, args.json, node)
    except Exception as e:  # noqa: BLE001 - one line on stderr, exit 1
        print(f"wrapper_path: error: {e}", file=sys.stderr)
        return 1
    out = {
        "jobs": args.jobs,
        "broker": args.broker,
        "idle_s": args.idle_s,
        "node": args.node,
        **results,
        "machine": support.machine(),
    }
    if args.json:
        print(json.dumps(out, indent=2))
        return 0
    rows = [
        ("skill script -> registered, median ms", "median_ms", "register"),
        ("registered -> brief in the pane, median ms", "median_ms", "deliver"),
        ("caller's process tree CPU per job, median ms", "median_ms", "cpu_ms"),
        ("wrapper CPU per job (+ the node's growth), mean ms", "median_ms", "wrapper_cpu_ms"),
        ("idle wrapper wake-ups/min, main thread", "idle_wakeups", "main_per_min"),
        ("idle wrapper wake-ups/min, all threads", "idle_wakeups", "all_per_min"),
    ]
    names = [n for n, _p in sides]
    print(f"\n{'metric':46}" + "".join(f"{n:>10}" for n in names) + ("     ratio" if len(names) == 2 else ""))
    for label, group, key in rows:
        values = [results[n][group][key] for n in names]
        ratio = f"{values[1] / values[0]:10.2f}" if len(values) == 2 and values[0] else ""
        print(f"{label:46}" + "".join(f"{v:10.1f}" for v in values) + ratio)
    return 0


if __name__ == "__main__":
    sys.exit(main())
