"""Node kills while tasks with blockers run (issue 42): a seeded graph of tasks over two roles (each task blocked by
some earlier ones), each a short demo job, while the node that wakes them is SIGKILLed at seeded random moments
after a task's job was made (while it is claimed, pasted or run); each time the next `mam role reset` (a command
that needs a node) starts another. A task that failed meanwhile (its brief never typed: the monitor or its start
deadline ended it) is reopened, until every task is done. Each kill adds one more task, so there is always more to
wake. Afterwards every invariant must hold:

- a task never has two open jobs: its jobs' lifetimes never overlap;
- each wake has its own job, named for it (`<task>-r<k>`), and the workspace has no other job;
- each job's brief reached its agent at most once (exactly once when it completed);
- no task got a job before every task it is blocked by was done;
- every task ends done.

Run by tests/faults/test_faults.py; the same seed gives the same graph and the same kill moments.
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

ROLES = (("dev-a", "a"), ("dev-b", "b"))
REOPENS = 5  # rounds of reopening the tasks that failed, at most
ENDED = ("completed", "failed", "timed_out", "cancelled")


def tasks() -> list[dict[str, Any]]:
    return list(json.loads(mam("task", "list", "--json", check=True).stdout))


def jobs() -> list[dict[str, Any]]:
    return list(json.loads(mam("job", "list", "--json", "--limit", "1000", check=True).stdout))


def add_task(rng: random.Random, ids: list[str]) -> None:
    """One more task of a seeded role, blocked by up to two earlier ones, a short demo job."""
    blockers = sorted(rng.sample(ids, k=min(len(ids), rng.randint(0, 2))))
    extra = ["--blocked-by", ",".join(blockers)] if blockers else []
    brief = f"demo-sleep: {rng.choice(('1', '2', '3'))}\nstep {len(ids)}"
    role = rng.choice(ROLES)[0]
    ids.append(
        mam("task", "add", f"step {len(ids)}", "--role", role, "--brief", brief, *extra, check=True).stdout.strip()
    )


def reopen_failed() -> int:
    """Reopen every failed task (its job ended otherwise than completed, e.g. orphaned by a kill); how many."""
    failed = [t["id"] for t in tasks() if t["state"] == "failed"]
    for task in failed:
        mam("task", "reopen", task, check=True)
    return len(failed)


def run_task_kills(ws: Workspace, *, seed: int, kills: int, count: int = 4) -> tuple[list[str], str]:
    """The invariant violations of one run (empty: all held), and a summary line. `count` tasks first, then one
    more with each kill (its `mam task add` starts the next node)."""
    rng = random.Random(seed)
    sessions = {name: create_demo(session) for name, session in ROLES}
    for name, session in ROLES:  # a breaker no failure of this run trips: the run is about the node's kills
        mam("role", "add", name, "--session", session, "--breaker", "1000", check=True)
    ids: list[str] = []
    seen = 0  # the jobs there were before the last task was added: a wake since makes one more
    for _ in range(count):
        add_task(rng, ids)
    reopened = mid = 0  # tasks reopened; kills while a task's job was open
    try:
        for _ in range(kills):
            pid = wait_for(lambda: node_pid(ws), timeout=30, message="no node runs")

            def woken(seen: int = seen) -> bool:
                nonlocal reopened
                reopened += reopen_failed()
                return len(jobs()) > seen

            wait_for(woken, timeout=90, message=lambda: f"no task was woken: {tasks()}")
            time.sleep(rng.uniform(0.0, 1.0))  # the kill's moment (the schedule), not a wait for a condition
            mid += any(j["state"] not in ENDED for j in jobs())
            os.kill(pid, signal.SIGKILL)
            seen = len(jobs())
            add_task(rng, ids)  # needs a node: starts the next one
        for _ in range(REOPENS):
            rows = wait_for(
                lambda: (r := tasks()) and all(t["state"] in ("done", "failed") for t in r) and r,
                timeout=180,
                message=lambda: f"tasks still open: {[(t['id'], t['state'], t['queued_for']) for t in tasks()]}",
            )
            if not any(t["state"] == "failed" for t in rows):
                break
            reopened += reopen_failed()
    finally:
        mam("node", "stop")
    rows = tasks()
    outcomes = Counter(str(w["outcome"]) for t in rows for w in t["wakes"])
    summary = (
        f"seed {seed}: {kills} node kills ({mid} with a task's job open), {len(rows)} tasks, {reopened} reopened; "
    )
    summary += "wakes: " + ", ".join(f"{n} {what}" for what, n in sorted(outcomes.items()))
    return check(ws, sessions, rows), summary


def check(ws: Workspace, sessions: dict[str, dict[str, Any]], rows: list[dict[str, Any]]) -> list[str]:
    bad: list[str] = []
    by_id = {t["id"]: t for t in rows}
    bad += [f"task {t['id']} ended {t['state']}" for t in rows if t["state"] != "done"]
    listed = jobs()
    views = {j["id"]: j for j in listed}  # every job's status, from one `mam job list` (`job status`'s view)
    made = Counter(j["id"] for j in listed)
    wakes = [(t["id"], w) for t in rows for w in t["wakes"]]
    bad += [
        f"task {t['id']} wake {k} has job {w['job']}"
        for t in rows
        for k, w in enumerate(t["wakes"], 1)
        if w["job"] != f"{t['id']}-r{k}"
    ]
    if made != Counter(w["job"] for _t, w in wakes):
        bad.append(f"jobs {sorted(made)} are not the wakes' {sorted(w['job'] for _t, w in wakes)}")
    turns = {
        role: json.loads((ws.state / "demo-agent" / "conversations" / f"{s['conversation_id']}.json").read_text())[
            "turns"
        ]
        for role, s in sessions.items()
    }
    for task, w in wakes:
        row = views[w["job"]]
        n = sum(
            1
            for turn in turns[by_id[task]["role"]]
            if turn["role"] == "user" and f"mam job {w['job']}." in turn["text"]
        )
        if n > 1 or (row["state"] == "completed" and n != 1):
            bad.append(f"job {w['job']} ({row['state']}) reached the agent {n} times")
    for t in rows:
        spans = []
        for w in t["wakes"]:
            row = views[w["job"]]
            spans.append((row["created_at"], row["ended_at"] or float("inf"), w["job"]))
        spans.sort()
        for (_a, a_end, a), (b_start, _b, b) in zip(spans, spans[1:]):
            if b_start < a_end:
                bad.append(f"task {t['id']}: jobs {a} and {b} were open at once")
        if t["wakes"] and t["blocked_by"]:
            first = views[t["wakes"][0]["job"]]["created_at"]
            for b in t["blocked_by"]:
                done_at = by_id[b]["ended_at"]
                if done_at is None or first < done_at:
                    bad.append(f"task {t['id']} got job {t['wakes'][0]['job']} before its blocker {b} was done")
    return bad
