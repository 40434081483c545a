"""The CPU the heartbeater costs per short job, this tree against a baseline tree, in one run.

Usage: python bench/heartbeater_cpu.py [--jobs 10] [--heartbeat 30] [--work-s 0.05] [--baseline DIR] [--json]

`--baseline DIR`: a folder holding another mam package (e.g. `git archive main mam | tar -x -C DIR`);
its side runs the same interpreter with PYTHONPATH=DIR, so only mam's code differs. Without it, this
tree alone. Run `python -m compileall -q mam` (and on DIR) first where PYTHONDONTWRITEBYTECODE is set.

Per job: a job registered through `Ledger.register` in a temporary workspace, a wrapper's Waiter on
the job's `events:<id>` key (mam.util.pokes: the beats count on disk, as with a real wrapper), an agent
(`sleep`, named by MAM_AGENT_PID), then `mam event started --job ID --heartbeat N` as the agent runs
it; after --work-s the job ends (cancelled, as a wrapper commits it, which pokes the job's key). This
script is the subreaper of the heartbeater (started in its own session), so it reaps it with os.wait4, whose rusage
gives its CPU to the microsecond (the /proc ticks of bench/_cpu.py round a few milliseconds to 0).
A heartbeater still running 2 s after the job's end (one that only notices it at its next beat) is
stopped by killing the agent, which it notices at once. Prints, per side, the median and mean CPU
per heartbeater, and how many stopped by themselves at the job's end, with the median delay.
Exits non-zero only on an error.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.append(str(Path(__file__).resolve().parents[1]))  # for `bench._cpu`

from bench import _cpu as cpu  # noqa: E402
from mam.jobs import heartbeat  # noqa: E402
from mam.jobs.model import End, JobState  # noqa: E402
from mam.jobs.record import now_ms  # noqa: E402
from mam.outcomes import Exit, Reason  # noqa: E402
from mam.store.registry import Registry  # noqa: E402
from mam.util import pokes  # noqa: E402
from mam.workspace import Workspace  # noqa: E402
from tests.helpers.jobs import register_delivered  # noqa: E402

STOP_WAIT_S = 2.0


def one_job(ws: Workspace, registry: Registry, env: dict[str, str], interval_s: float, work_s: float) -> dict[str, Any]:
    ledger = register_delivered(ws, registry, topic_prefix="bench/heartbeater", heartbeat_ms=int(interval_s * 1000))
    job = ledger.job
    listener = pokes.Waiter(ws, [pokes.events_key(job.id)])
    agent = subprocess.Popen(["sleep", "600"])
    try:
        subprocess.run(
            [sys.executable, "-m", "mam", "event", "started", "--job", job.id, "--heartbeat", repr(interval_s)],
            cwd=ws.root,
            env={**env, "MAM_AGENT_PID": str(agent.pid)},
            check=True,
            capture_output=True,
            timeout=60,
        )
        found = heartbeat.recorded(ws, job.id)
        if found is None:
            raise RuntimeError("no heartbeat.pid once `mam event started` returned")
        pid = found[0]
        time.sleep(work_s)  # the agent's work
        ended = time.monotonic()
        ledger.apply(End(at=now_ms(), state=JobState.CANCELLED, reason=Reason.CANCELLED_BY_USER, exit_code=Exit.OK))
        stopped: float | None = None
        reaped = None
        while time.monotonic() < ended + STOP_WAIT_S:
            got = os.wait4(pid, os.WNOHANG)
            if got[0] == pid:
                reaped, stopped = got, time.monotonic() - ended
                break
            time.sleep(0.002)
        agent.kill()
        if reaped is None:
            reaped = os.wait4(pid, 0)
        usage = reaped[2]
        return {"cpu_s": usage.ru_utime + usage.ru_stime, "stopped_after_s": stopped}
    finally:
        agent.kill()
        agent.wait()
        listener.close()


def side(label: str, pythonpath: str, jobs: int, interval_s: float, work_s: float) -> dict[str, Any]:
    with tempfile.TemporaryDirectory(prefix="mam-bench-hb-") as tmp:
        ws = Workspace((Path(tmp) / "ws").resolve())
        ws.root.mkdir()
        env = {**os.environ, "MAM_WORKSPACE": str(ws.root), "MAM_NO_AUTOSTART": "1"}
        if pythonpath:
            env["PYTHONPATH"] = pythonpath
        registry = Registry(ws)
        try:
            one_job(ws, registry, env, interval_s, work_s)  # warm-up, not counted
            runs = [one_job(ws, registry, env, interval_s, work_s) for _ in range(jobs)]
        finally:
            registry.close()
    used = [r["cpu_s"] for r in runs]
    delays = [r["stopped_after_s"] for r in runs if r["stopped_after_s"] is not None]
    return {
        "side": label,
        "jobs": jobs,
        "cpu_ms_median": round(statistics.median(used) * 1000, 2),
        "cpu_ms_mean": round(statistics.mean(used) * 1000, 2),
        "stopped_at_the_end": len(delays),
        "stop_delay_ms_median": round(statistics.median(delays) * 1000, 1) if delays else None,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--jobs", type=int, default=10)
    parser.add_argument("--heartbeat", type=float, default=30.0, help="N of `--heartbeat N` (the agents' default)")
    parser.add_argument("--work-s", type=float, default=0.05)
    parser.add_argument("--baseline", default="", help="a folder holding another mam package")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    if not cpu.become_subreaper():
        print("heartbeater_cpu: cannot become a subreaper (Linux only)", file=sys.stderr)
        return 1
    results = [side("this tree", "", args.jobs, args.heartbeat, args.work_s)]
    if args.baseline:
        results.append(side("baseline", str(Path(args.baseline).resolve()), args.jobs, args.heartbeat, args.work_s))
    if args.json:
        print(json.dumps(results, indent=2))
        return 0
    for r in results:
        delay = f", median {r['stop_delay_ms_median']} ms after it" if r["stop_delay_ms_median"] is not None else ""
        print(
            f"{r['side']}: heartbeater CPU per job {r['cpu_ms_median']} ms median, {r['cpu_ms_mean']} ms mean"
            f" ({r['jobs']} jobs of {args.work_s * 1000:.0f} ms, --heartbeat {args.heartbeat:g});"
            f" {r['stopped_at_the_end']} stopped by themselves at the job's end{delay}"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
