"""Where the time of a `mam job delegate` goes, for a job the demo agent completes at once.

Usage: python bench/delegate_overhead.py [--jobs 10] [--broker mosquitto|amqtt] [--json]

Set-up (not timed): a temporary workspace with its own HOME, a private tmux server (a unique
socket name), a private broker on a free loopback port (started through its own Popen handle),
and one demo agent session created with `mam session create --agent demo`.

Timed: `--jobs` runs, one after another, of
    <venv>/bin/mam job delegate --target tmux:bench --brief "..." --json --start-deadline 30 --heartbeat 1
as a fresh process (after one untimed warm-up job). Each job is broken down from its audit log
(wrapper clock) and the agent's signed events (agent clock, same host):

  start-up   CLI process spawned -> job `created` (interpreter, imports, settings, registry)
  queue      created -> claim      (registry, session lookup, turn wait, liveness check)
  inject     claim -> injected     (wait for the agent's prompt, paste the brief, Enter)
  ack        delivered -> started  (the agent reads the brief and runs `mam event started`;
             split into agent -> signed, and signed -> wrapper applied it)
  complete   started -> completed  (the agent runs `mam event completed`; the work itself is nil)
  exit       completed -> process exit (final state published, output, interpreter exit)
  total      wall time of the CLI process

Prints the median of each. Cleans up everything it started: the tmux server (killed through its
own socket, which is then removed), the broker, the workspace. Exits non-zero only on an error.
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path
from typing import Any

sys.path.append(str(Path(__file__).resolve().parents[1]))  # for `bench._support`; mam itself comes from the venv

from bench import _support as support  # noqa: E402

SESSION = support.DEMO_SESSION
SEGMENTS = (
    ("startup", "CLI spawn -> created", "process start, imports, settings, registry, register"),
    ("queue", "created -> claim", "registry + session lookup + turn wait + liveness check"),
    ("inject", "claim -> injected", "wait for the prompt, paste, Enter"),
    ("ack", "delivered -> started", "agent reads the brief, runs `mam event started`, wrapper applies it"),
    ("ack_agent", "  delivered -> signed", "agent side: reaction + `mam event started` up to signing"),
    ("ack_wire", "  signed -> applied", "publish, broker, wrapper intake + ledger commit"),
    ("complete", "started -> completed", "agent runs `mam event completed` (no work), wrapper applies it"),
    ("exit", "completed -> exit", "final state published, output, interpreter exit"),
    ("total", "total wall", "the whole `mam job delegate` process"),
)


def delegate_once(i: int, env: dict[str, str], ws: Any) -> dict[str, float]:
    """Run one `mam job delegate` and break its time down (ms)."""
    from mam.jobs.record import read_audit
    from mam.store.registry import Registry

    spawned_ms = time.time() * 1000
    start = time.perf_counter()
    proc = support.run_mam(
        [
            "job",
            "delegate",
            "--target",
            f"tmux:{SESSION}",
            "--brief",
            f"Benchmark job {i}: nothing to do, report at once.",
            "--json",
            "--start-deadline",
            "30",
            "--heartbeat",
            "1",
        ],
        env,
        ws.root,
    )
    total = (time.perf_counter() - start) * 1000
    exited_ms = spawned_ms + total
    record = json.loads(proc.stdout)
    if record.get("state") != "completed":
        raise RuntimeError(
            f"job {record.get('id')} ended {record.get('state')} ({record.get('reason')}): {record.get('detail')}"
        )
    job_id = record["id"]
    audit = read_audit(ws, job_id)
    at: dict[str, float] = {}
    for line in audit:
        if line["kind"] in ("created", "injected"):
            at.setdefault(line["kind"], line["ts_ms"])
        elif line["kind"] == "input":
            inp = line["input"]
            name = inp.get("type") if inp["input"] == "event" else inp["input"]
            at.setdefault(str(name), inp["at"])
    registry = Registry(ws)
    try:
        signed = {e.type: e.ts for e in registry.events_after(job_id)}
    finally:
        registry.close()
    missing = [k for k in ("created", "claim", "injected", "delivered", "started", "completed") if k not in at]
    if missing or "started" not in signed:
        raise RuntimeError(f"job {job_id}: audit log lacks {missing or ['signed started event']}")
    return {
        "startup": at["created"] - spawned_ms,
        "queue": at["claim"] - at["created"],
        "inject": at["injected"] - at["claim"],
        "ack": at["started"] - at["delivered"],
        "ack_agent": signed["started"] - at["delivered"],
        "ack_wire": at["started"] - signed["started"],
        "complete": at["completed"] - at["started"],
        "exit": exited_ms - at["completed"],
        "total": total,
    }


def main(argv: list[str] | None = None) -> int:
    args = support.jobs_args(argv, __doc__, "timed delegations (default 10)")
    if not support.have_tmux("delegate_overhead"):
        return 2

    rows: list[dict[str, float]] = []
    wall_start = time.perf_counter()
    try:
        with support.demo_workspace("mam-bench-delegate-", args.broker) as bench:
            delegate_once(0, bench.env, bench.ws)  # warm-up: bytecode cache, SQLite pages, the agent's first prompt
            for i in range(1, args.jobs + 1):
                rows.append(delegate_once(i, bench.env, bench.ws))
                if not args.json:
                    r = rows[-1]
                    print(
                        f"job {i:2}: total {r['total']:7.1f} ms  (start-up {r['startup']:6.1f}, queue "
                        f"{r['queue']:6.1f}, inject {r['inject']:6.1f}, "
                        f"ack {r['ack']:6.1f}, complete {r['complete']:6.1f}, exit {r['exit']:6.1f})",
                        flush=True,
                    )
    except Exception as e:  # noqa: BLE001 - one line on stderr, exit 1
        print(f"delegate_overhead: error: {e}", file=sys.stderr)
        return 1

    medians = {key: round(float(support.median([r[key] for r in rows])), 1) for key, _label, _what in SEGMENTS}
    result = {
        "jobs": args.jobs,
        "broker": args.broker,
        "median_ms": medians,
        "runs_ms": [{k: round(float(v), 1) for k, v in r.items()} for r in rows],
        "bench_seconds": round(time.perf_counter() - wall_start, 1),
        "machine": support.machine(),
    }
    if args.json:
        print(json.dumps(result, indent=2))
        return 0
    print(f"\nmedians over {args.jobs} jobs ({args.broker}):")
    for key, label, what in SEGMENTS:
        print(f"  {label:24} {medians[key]:8.1f} ms   {what}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
