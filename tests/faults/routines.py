"""Node kills during routine ticks (issue 29): a routine fires every 2 s into a demo agent while its node is
SIGKILLed at seeded random moments after a tick fired (while the job is being claimed, pasted or run);
each time the next `mam routine` command starts another node. Afterwards every invariant must hold:

- each tick was decided once (its key is unique) and none is left pending or firing;
- each fired tick has its own job, named for the tick (`rt-<n>-<routine>`), and the workspace has no other job;
- each job's brief reached the agent at most once (exactly once when it completed);
- with `--concurrency skip`, the routine's jobs never overlap in time, across the kills too.

Run by tests/faults/test_faults.py; the same seed gives the same kill moments.
"""

from __future__ import annotations

import json
import os
import random
import signal
import time
from collections import Counter
from typing import Any

from mam.util.poll import wait_for
from mam.workspace import Workspace
from tests.e2e.test_node import node_pid
from tests.helpers.jobs import create_demo
from tests.helpers.mamcli import mam

NAME = "patrol"


def receipts() -> list[dict[str, Any]]:
    out = mam("routine", "log", NAME, "--json", "--limit", "1000", check=True).stdout
    return list(reversed(json.loads(out)))


def fired() -> list[dict[str, Any]]:
    return [t for t in receipts() if t["job"]]


def run_routine_kills(ws: Workspace, *, seed: int, kills: int) -> tuple[list[str], str]:
    """The invariant violations of one run (empty: all held), and a summary line."""
    rng = random.Random(seed)
    session = create_demo("w")
    mam("routine", "add", NAME, "--target", "w", "--brief", "demo-sleep: 1\npatrol", "--every", "2s", check=True)
    try:
        for _ in range(kills):
            pid = wait_for(lambda: node_pid(ws), timeout=30, message="no node runs")
            seen = len(fired())
            wait_for(lambda seen=seen: len(fired()) > seen, timeout=60, message="no tick fired")
            time.sleep(rng.uniform(0.0, 1.5))  # the kill's moment (the schedule), not a wait for a condition
            os.kill(pid, signal.SIGKILL)
            mam("routine", "resume", NAME, check=True)  # starts the next node
        wait_for(lambda: node_pid(ws), timeout=30, message="no node came back")
        mam("routine", "pause", NAME, check=True)
        rows = wait_for(
            lambda: (r := receipts()) and all(t["status"] not in ("firing", "pending") for t in r) and r,
            timeout=120,
            message=lambda: f"ticks still open: {[t for t in receipts() if t['status'] in ('firing', 'pending')]}",
        )
    finally:
        mam("node", "stop")
    outcomes = Counter(str(t["outcome"] or t["reason"]) for t in rows)
    summary = f"seed {seed}: {kills} node kills, {len(rows)} ticks: " + ", ".join(
        f"{n} {what}" for what, n in sorted(outcomes.items())
    )
    return check(ws, session, rows, kills=kills), summary


def check(ws: Workspace, session: dict[str, Any], rows: list[dict[str, Any]], *, kills: int) -> list[str]:
    bad: list[str] = []
    keys = Counter(t["key"] for t in rows)
    bad += [f"tick {k} recorded {n} times" for k, n in keys.items() if n > 1]
    ticks = [t for t in rows if t["job"]]
    if len(ticks) < kills:
        bad.append(f"only {len(ticks)} ticks fired for {kills} kills")
    bad += [f"tick {t['n']} has job {t['job']}" for t in ticks if t["job"] != f"rt-{t['n']}-{NAME}"]
    jobs = json.loads(mam("job", "list", "--json", "--limit", "1000", check=True).stdout)
    if Counter(j["id"] for j in jobs) != Counter(t["job"] for t in ticks):
        bad.append(f"jobs {sorted(j['id'] for j in jobs)} are not the fired ticks' {sorted(t['job'] for t in ticks)}")
    path = ws.state / "demo-agent" / "conversations" / f"{session['conversation_id']}.json"
    turns = json.loads(path.read_text())["turns"]
    for t in ticks:
        n = sum(1 for turn in turns if turn["role"] == "user" and t["job"] in turn["text"])
        if n > 1 or (t["outcome"] == "completed" and n != 1):
            bad.append(f"job {t['job']} ({t['outcome']}) reached the agent {n} times")
    spans = []
    views = {j["id"]: j for j in jobs}  # the same view as `mam job status`, every job in one call
    for t in ticks:
        row = views[t["job"]]
        spans.append((row["created_at"], row["ended_at"] or float("inf"), t["job"]))
    spans.sort()
    for (_a, a_end, a), (b_start, _b, b) in zip(spans, spans[1:]):
        if b_start < a_end:
            bad.append(f"jobs {a} and {b} were open at once (--concurrency skip)")
    return bad
