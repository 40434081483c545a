"""Governor stress run (issue 17): many submissions with `--dedup` over a few demo sessions, a cap on
running jobs and a lifetime token budget that runs out part-way.

Default: 500 submissions (50 distinct briefs, each 10 times, shuffled) over 12 demo sessions on a
private Mosquitto, MAM_MAX_RUNNING_JOBS=4 and MAM_TOKEN_BUDGET sized to about half of the distinct
work. Brief i goes to session i mod 12 (the dedup key is the session and the brief) and asks the
demo agent for a deterministic usage (`demo-tokens: N`, see mam/demo/agent.py). A pool of
submitter threads in this process calls the delegation wrapper (the library call of
`mam job delegate --dedup`), each with its own registry connection, sharing one MQTT connection.

An independent monitor thread samples, every --sample-s seconds, the registry (jobs delivered and
not ended; queued; the budget's committed and reserved tokens) and the demo agents' own
conversation logs (a `work: begin` turn without its `work: end`), and keeps the peaks. Afterwards
the same logs give the exact peak of agents working at once (a sweep over their intervals).

Prints: submitted, reached the queue (distinct), collapsed by dedup (in flight + recent), executed,
rejected by budget, tokens committed against a naive no-dedup estimate, peak running (registry and
agents' logs, must be <= the cap), peak tokens used against the cap (must be <= it) and the time a
job spent at the queue. Exit 1 if a cap was breached, a submission errored or a job was left open.

    .venv/bin/python bench/governor_stress.py                      # 500 submissions, 12 sessions
    .venv/bin/python bench/governor_stress.py --submissions 40 --distinct 8 --sessions 3 --json
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import math
import os
import queue
import random
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from bench._support import clean_environ, kill_tmux, machine, wait_heartbeaters_gone  # noqa: E402
from mam.jobs.delegate import DelegateRequest, delegate, delegate_request  # noqa: E402
from mam.jobs.record import read_audit  # noqa: E402
from mam.outcomes import Exit, JobState  # noqa: E402
from mam.settings import Settings, load_settings  # noqa: E402
from mam.store.registry import Registry  # noqa: E402
from mam.workspace import Workspace  # noqa: E402
from tests.helpers.brokers import start_mosquitto  # noqa: E402

MAM = str(Path(sys.executable).parent / "mam")
CLAIMED = (JobState.DELIVERING.value, JobState.DELIVERED.value, JobState.RUNNING.value)  # counted by the cap
QUEUED = getattr(JobState, "QUEUED", JobState.PENDING).value  # the governor's state (issue 17)
SETTINGS_FIELDS = {f.name for f in dataclasses.fields(Settings)}
REQUEST_FIELDS = {f.name for f in dataclasses.fields(DelegateRequest)}
HAS_CAP = "max_running_jobs" in SETTINGS_FIELDS
HAS_BUDGET = "token_budget" in SETTINGS_FIELDS
BUDGET_EXIT: int | None = getattr(Exit, "BUDGET", None)


def brief_of(i: int) -> str:
    """Distinct brief i: a deterministic usage (input: its bytes with the footer / 4; output: N + the reply's)."""
    return f"governor stress brief {i:03d}\ndemo-tokens: {100 + 10 * (i % 10)}"


# -- what the monitor reads --------------------------------------------------------------------
def working_now(logs: list[Path]) -> int:
    """Agents working at this moment, from their own conversation logs (last work turn is `begin`)."""
    n = 0
    for path in logs:
        try:
            turns = json.loads(path.read_text())["turns"]
        except (OSError, ValueError, KeyError):
            continue  # being replaced right now: the next sample reads it
        last = next((t.get("work") for t in reversed(turns) if t.get("work")), None)
        n += last == "begin"
    return n


def work_intervals(logs: list[Path]) -> list[tuple[float, float]]:
    """(begin, end) of every job each agent worked on, from its own log."""
    out = []
    for path in logs:
        begun: dict[str, float] = {}
        for t in json.loads(path.read_text())["turns"]:
            if t.get("work") == "begin":
                begun[t["job"]] = t["ts"]
            elif t.get("work") in ("end", "interrupted") and t.get("job") in begun:
                out.append((begun.pop(t["job"]), t["ts"]))
        out.extend((b, math.inf) for b in begun.values())
    return out


def peak_overlap(intervals: list[tuple[float, float]]) -> int:
    edges = sorted([(b, 1) for b, _e in intervals] + [(e, -1) for _b, e in intervals], key=lambda x: (x[0], x[1]))
    peak = now = 0
    for _t, d in edges:
        now += d
        peak = max(peak, now)
    return peak


def budget_reader() -> Callable[[Any], tuple[int, int] | None] | None:
    """(committed, reserved) tokens against the lifetime budget, read from the governor's reservations
    table as the monitor's own SQL; None before the governor."""
    try:
        from mam.governor import reservations as rs
    except ImportError:
        return None

    def read(conn: Any) -> tuple[int, int] | None:
        row = conn.execute(
            "SELECT COALESCE(SUM(CASE WHEN status=? THEN committed END), 0), "
            "COALESCE(SUM(CASE WHEN status=? THEN reserved END), 0) FROM reservations",
            (rs.COMMITTED, rs.HELD),
        ).fetchone()
        return int(row[0]), int(row[1])

    return read


def governor_view(registry: Registry, settings: Settings) -> dict[str, Any] | None:
    """What `mam budget --json` says at the end; None before the governor."""
    try:
        from mam.governor.status import budget_status
    except ImportError:
        return None
    return budget_status(registry, settings)


class Monitor(threading.Thread):
    """Samples the registry and the agents' logs until stopped; keeps the peaks."""

    def __init__(self, ws: Workspace, logs: list[Path], every: float) -> None:
        super().__init__(name="governor-stress-monitor", daemon=True)
        self.ws, self.logs, self.every = ws, logs, every
        self.stop = threading.Event()
        self.samples = 0
        self.peak_running = self.peak_working = self.peak_queued = 0
        self.peak_used = self.peak_committed = 0
        self.budget = budget_reader()

    def run(self) -> None:
        registry = Registry(self.ws)  # its own connection
        marks = ",".join("?" * len(CLAIMED))
        try:
            while not self.stop.is_set():
                with registry.read() as conn:
                    running = conn.execute(f"SELECT COUNT(*) FROM jobs WHERE state IN ({marks})", CLAIMED).fetchone()[0]
                    queued = conn.execute("SELECT COUNT(*) FROM jobs WHERE state=?", (QUEUED,)).fetchone()[0]
                    spent = self.budget(conn) if self.budget is not None else None
                self.peak_running = max(self.peak_running, running)
                self.peak_queued = max(self.peak_queued, queued)
                if spent is not None:
                    self.peak_committed = max(self.peak_committed, spent[0])
                    self.peak_used = max(self.peak_used, spent[0] + spent[1])
                self.peak_working = max(self.peak_working, working_now(self.logs))
                self.samples += 1
                self.stop.wait(self.every)
        finally:
            registry.close()


# -- the run -----------------------------------------------------------------------------------
def run(args: argparse.Namespace) -> dict[str, Any]:
    root = Path(tempfile.mkdtemp(prefix="mam-governor-stress-"))
    ws = Workspace((root / "ws").resolve())
    ws.root.mkdir()
    home = root / "home"
    home.mkdir()
    tmux = f"mam-gov-{uuid.uuid4().hex[:8]}"
    broker = start_mosquitto(root)
    env = clean_environ(
        root / "pycache",
        MAM_WORKSPACE=str(ws.root),
        MAM_TMUX_SERVER=tmux,
        MQTT_BROKER=broker.host,
        MQTT_PORT=str(broker.port),
        HOME=str(home),
        SHELL="/bin/sh",
        MAM_POLL_S=str(args.poll_s),
        MAM_DISPATCH_WAIT_S="3600",
        MAM_MAX_RUNNING_JOBS=str(args.max_running),
        MAM_TOKEN_BUDGET=str(args.budget),
        MAM_DEFAULT_ESTIMATE_TOKENS=str(args.estimate),
        PATH=os.pathsep.join([str(Path(sys.executable).parent), os.environ.get("PATH", os.defpath)]),
    )
    settings = load_settings(env_file=None, environ=env)
    names = [f"g{i:02d}" for i in range(args.sessions)]
    monitor: Monitor | None = None
    try:
        t0 = time.monotonic()
        creating = [
            subprocess.Popen(
                [MAM, "session", "create", "--agent", "demo", "--role", "dev", "--session", name],
                env=env,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.PIPE,
                text=True,
                cwd=ws.root,
            )
            for name in names
        ]
        for name, proc in zip(names, creating, strict=True):
            _out, err = proc.communicate(timeout=300)
            if proc.returncode != 0:
                raise RuntimeError(f"session create {name}: {err.strip()[-500:]}")
        setup_s = time.monotonic() - t0
        reg = Registry(ws)
        logs = [ws.state / "demo-agent" / "conversations" / f"{r.conversation_id}.json" for r in reg.sessions()]
        reg.close()

        order = [i % args.distinct for i in range(args.submissions)]
        random.Random(args.seed).shuffle(order)
        todo: queue.Queue[int] = queue.Queue()
        for i in order:
            todo.put(i)
        results: list[dict[str, Any]] = []
        errors: list[str] = []
        lock = threading.Lock()
        from mam.bus.connect import open_client

        shared = open_client(settings, ws, role="governor-stress", timeout=30)
        # The reservation is the most a job may spend (--max-tokens): no job can pass its estimate, so
        # what is committed never exceeds what was admitted and the budget holds as a hard cap.
        extra = (
            {"estimate_tokens": args.estimate, "max_tokens": args.estimate}
            if {"estimate_tokens", "max_tokens"} <= REQUEST_FIELDS
            else {}
        )

        def submitter() -> None:
            registry = Registry(ws)
            try:
                while True:
                    try:
                        i = todo.get_nowait()
                    except queue.Empty:
                        return
                    req = delegate_request(
                        target=f"tmux:{names[i % len(names)]}",
                        brief=brief_of(i),
                        dedup=True,
                        start_deadline_s=120,
                        heartbeat_s=10,
                        timeout_s=900,
                        dispatch_wait_s=3600,
                        **extra,
                    )
                    began = time.monotonic()
                    try:
                        out = delegate(req, ws=ws, settings=settings, registry=registry, client=shared)
                    except Exception as e:  # counted; the pool goes on
                        with lock:
                            errors.append(f"brief {i}: {type(e).__name__}: {e}")
                        continue
                    row = {
                        "brief": i,
                        "job": out.job_id,
                        "attached": out.attached,
                        "state": out.state,
                        "reason": out.reason,
                        "exit_code": out.exit_code,
                        "s": time.monotonic() - began,
                    }
                    with lock:
                        results.append(row)
            finally:
                registry.close()

        monitor = Monitor(ws, logs, args.sample_s)
        monitor.start()
        pool = [threading.Thread(target=submitter, name=f"submitter-{n}") for n in range(args.workers)]
        start = time.monotonic()
        for t in pool:
            t.start()
        for t in pool:
            t.join()
        wall = time.monotonic() - start
        monitor.stop.set()
        monitor.join(10)
        shared.close()
        final = Registry(ws)
        try:
            view = governor_view(final, settings)
        finally:
            final.close()
        return summarize(args, ws, logs, results, errors, monitor, view, wall=wall, setup_s=setup_s)
    finally:
        if monitor is not None:
            monitor.stop.set()
        kill_tmux(tmux)
        wait_heartbeaters_gone(ws)
        broker.stop()
        if not args.keep:
            shutil.rmtree(root, ignore_errors=True)
        else:
            print(f"kept {root}", file=sys.stderr)


def total_tokens(usage: Any) -> int | None:
    if not isinstance(usage, dict):
        return None
    if isinstance(usage.get("total_tokens"), int):
        return int(usage["total_tokens"])
    parts = [usage.get(k) for k in ("input_tokens", "output_tokens", "cache_read_tokens", "cache_write_tokens")]
    return sum(int(p or 0) for p in parts) if any(isinstance(p, int) for p in parts) else None


def summarize(
    args: argparse.Namespace,
    ws: Workspace,
    logs: list[Path],
    results: list[dict[str, Any]],
    errors: list[str],
    monitor: Monitor,
    view: dict[str, Any] | None,
    *,
    wall: float,
    setup_s: float,
) -> dict[str, Any]:
    registry = Registry(ws)
    try:
        with registry.read() as conn:
            rows = conn.execute("SELECT id, state, reason, exit_code, data, created_at FROM jobs").fetchall()
    finally:
        registry.close()
    jobs = {r["id"]: r for r in rows}
    attached_lines: Counter[str] = Counter()
    at_queue: list[float] = []
    executed = 0
    usage_of: dict[str, int] = {}
    for job_id, r in jobs.items():
        lines = read_audit(ws, job_id)
        claim = next(
            (x["input"]["at"] for x in lines if x["kind"] == "input" and x["input"].get("input") == "claim"), None
        )
        if claim is not None:
            executed += 1
            at_queue.append(claim / 1000 - float(r["created_at"]))
        for x in lines:
            if x["kind"] == "attached":
                attached_lines[
                    "in flight" if x.get("job_state") in (*CLAIMED, JobState.PENDING.value, QUEUED) else "recent"
                ] += 1
        tokens = total_tokens((json.loads(r["data"] or "{}").get("meta") or {}).get("usage"))
        if tokens is not None:
            usage_of[job_id] = tokens
    budget_codes = {BUDGET_EXIT} if BUDGET_EXIT is not None else set()
    by_exit = Counter(r["exit_code"] for r in results)
    rejected = sum(1 for r in results if r["exit_code"] in budget_codes)
    rejected_jobs = sum(1 for r in jobs.values() if r["exit_code"] in budget_codes)
    measured = sum(usage_of.values())
    # Without dedup every submission would run: the usage each brief's job measured (briefs whose job
    # never ran: the mean of those that did).
    per_brief = {}
    for r in results:
        if not r["attached"] and r["job"] in usage_of:
            per_brief[r["brief"]] = usage_of[r["job"]]
    mean_usage = statistics.mean(per_brief.values()) if per_brief else None
    naive = (
        round(sum(per_brief.get(r["brief"], mean_usage) for r in results) + len(errors) * mean_usage)
        if mean_usage is not None
        else None
    )
    lifetime = next((c for c in view["caps"] if c["name"] == "lifetime"), None) if view else None
    exact_working = peak_overlap(work_intervals(logs))
    out = {
        "submitted": len(results) + len(errors),
        "errors": len(errors),
        "error_samples": errors[:5],
        "distinct_briefs": args.distinct,
        "sessions": args.sessions,
        "workers": args.workers,
        "reached_queue": len(jobs),
        "collapsed": sum(1 for r in results if r["attached"]),
        "collapsed_in_flight": attached_lines["in flight"],
        "collapsed_recent": attached_lines["recent"],
        "executed": executed,
        "open_at_end": sum(1 for r in jobs.values() if r["state"] in (*CLAIMED, JobState.PENDING.value, QUEUED)),
        "succeeded": by_exit.get(Exit.OK, 0),
        "exit_codes": {str(k): v for k, v in sorted(by_exit.items())},
        "rejected_by_budget": rejected,
        "rejected_jobs_by_budget": rejected_jobs,
        "tokens_measured": measured,
        "tokens_committed": lifetime["committed"] if lifetime else None,
        "tokens_reserved_at_end": lifetime["reserved"] if lifetime else None,
        "tokens_saved_by_dedup": view["tokens_saved_by_dedup"] if view else None,
        "naive_tokens": naive,
        "mean_tokens_per_job": round(mean_usage, 1) if mean_usage is not None else None,
        "cap_running": args.max_running if HAS_CAP else None,
        "peak_running_registry": monitor.peak_running,
        "peak_working_logs_sampled": monitor.peak_working,
        "peak_working_logs_exact": exact_working,
        "peak_queued": monitor.peak_queued,
        "budget": args.budget if HAS_BUDGET else None,
        "peak_used": monitor.peak_used if monitor.budget is not None else None,
        "peak_committed": monitor.peak_committed if monitor.budget is not None else None,
        "at_queue_p50_s": round(statistics.median(at_queue), 2) if at_queue else None,
        "at_queue_p90_s": round(sorted(at_queue)[int(0.9 * (len(at_queue) - 1))], 2) if at_queue else None,
        "at_queue_max_s": round(max(at_queue), 2) if at_queue else None,
        "wall_s": round(wall, 1),
        "s_per_executed_job": round(wall / executed, 2) if executed else None,
        "setup_s": round(setup_s, 1),
        "monitor_samples": monitor.samples,
        "unmeasured": [
            what
            for what, present in (
                ("running cap (MAM_MAX_RUNNING_JOBS)", HAS_CAP),
                ("token budget (MAM_TOKEN_BUDGET, exit 6)", HAS_BUDGET and BUDGET_EXIT is not None),
                ("budget ledger (committed / reserved tokens)", monitor.budget is not None),
            )
            if not present
        ],
    }
    cap_ok = not HAS_CAP or max(out["peak_running_registry"], exact_working) <= args.max_running
    budget_ok = out["peak_used"] is None or not HAS_BUDGET or out["peak_used"] <= args.budget
    out["caps_held"] = bool(cap_ok and budget_ok)
    out["ok"] = out["caps_held"] and not out["errors"] and not out["open_at_end"]
    return out


def show(r: dict[str, Any]) -> None:
    def line(label: str, value: Any) -> None:
        print(f"{label} {'.' * max(2, 30 - len(label))} {value}")

    n = r["submitted"] or 1
    print("DEDUP")
    line("submitted", r["submitted"])
    line("reached the queue", f"{r['reached_queue']} (distinct work)")
    line(
        "collapsed by dedup",
        f"{r['collapsed']} ({100 * r['collapsed'] / n:.1f}%) "
        f"[in flight {r['collapsed_in_flight']} + recent {r['collapsed_recent']}]",
    )
    print("EXECUTION")
    line("executed (agent ran it)", r["executed"])
    line("succeeded (exit 0)", r["succeeded"])
    line("rejected by budget", f"{r['rejected_by_budget']} submissions ({r['rejected_jobs_by_budget']} jobs)")
    line("exit codes", r["exit_codes"])
    line("jobs still open at the end", r["open_at_end"])
    if r["errors"]:
        line("errors", f"{r['errors']} {r['error_samples']}")
    print("TOKENS")
    line("committed (mam budget)", r["tokens_committed"] if r["tokens_committed"] is not None else "not measured")
    line("reserved at the end", r["tokens_reserved_at_end"] if r["tokens_reserved_at_end"] is not None else "-")
    line("measured (jobs' usage)", f"{r['tokens_measured']} (mean {r['mean_tokens_per_job']} per job)")
    if r["naive_tokens"]:
        spent = r["tokens_committed"] if r["tokens_committed"] is not None else r["tokens_measured"]
        line("naive without dedup ~", f"{r['naive_tokens']} => ~{100 * (1 - spent / r['naive_tokens']):.0f}% saved")
    line("saved by dedup (mam budget)", r["tokens_saved_by_dedup"] if r["tokens_saved_by_dedup"] is not None else "-")
    print("CAPS")
    cap = r["cap_running"]
    line("running cap", cap if cap is not None else "not measured (no MAM_MAX_RUNNING_JOBS)")
    line("peak running (registry)", r["peak_running_registry"])
    line("peak working (agent logs)", f"{r['peak_working_logs_exact']} (sampled {r['peak_working_logs_sampled']})")
    line("peak queued", r["peak_queued"])
    line("token cap", r["budget"] if r["budget"] is not None else "not measured (no MAM_TOKEN_BUDGET)")
    line("peak used (commit+reserve)", r["peak_used"] if r["peak_used"] is not None else "not measured")
    print("QUEUE")
    line("time at the queue p50", f"{r['at_queue_p50_s']} s (p90 {r['at_queue_p90_s']} s, max {r['at_queue_max_s']} s)")
    line("wall", f"{r['wall_s']} s ({r['s_per_executed_job']} s per executed job; setup {r['setup_s']} s)")
    line("monitor samples", r["monitor_samples"])
    if r["unmeasured"]:
        line("not measured", "; ".join(r["unmeasured"]))
    print(f"CAPS HELD: {'yes' if r['caps_held'] else 'NO'}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--submissions", type=int, default=500)
    parser.add_argument(
        "--distinct", type=int, default=50, help="distinct briefs (each submitted submissions/distinct times)"
    )
    parser.add_argument("--sessions", type=int, default=12, help="demo sessions")
    parser.add_argument("--workers", type=int, default=50, help="submitter threads (delegations open at once)")
    parser.add_argument("--max-running", type=int, default=4, help="MAM_MAX_RUNNING_JOBS")
    parser.add_argument(
        "--budget", type=int, default=0, help="MAM_TOKEN_BUDGET (0: about half the distinct work's usage)"
    )
    parser.add_argument(
        "--estimate", type=int, default=600, help="tokens reserved per job (--estimate-tokens, also its --max-tokens)"
    )
    parser.add_argument("--poll-s", type=float, default=0.25, help="MAM_POLL_S")
    parser.add_argument("--sample-s", type=float, default=0.05, help="how often the monitor samples")
    parser.add_argument("--seed", type=int, default=17)
    parser.add_argument("--keep", action="store_true", help="keep the temporary workspace")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    if min(args.submissions, args.distinct, args.sessions, args.workers, args.max_running) <= 0:
        parser.error("--submissions, --distinct, --sessions, --workers and --max-running must be positive")
    if args.budget == 0:
        args.budget = USAGE_PER_JOB * args.distinct // 2
    r = run(args)
    r["machine"] = machine()
    r["argv"] = sys.argv[1:] if argv is None else argv
    if args.json:
        print(json.dumps(r, indent=2))
    else:
        show(r)
    return 0 if r["ok"] else 1


USAGE_PER_JOB = 420  # about what one distinct brief costs the demo agent (its input with the footer, N, the reply)

if __name__ == "__main__":
    sys.exit(main())
