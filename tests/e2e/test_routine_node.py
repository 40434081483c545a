"""Routines fired by the real node (issue 29): `mam routine add` starts it and an enabled routine keeps it;
a node killed (SIGKILL) while a tick's job runs, or while ticks keep coming, is replaced and no tick fires
twice: each tick has one job, and each job's brief reaches the agent once. Real tmux, demo agents, a real
broker, real time (the driven-clock cases are in test_routines.py)."""

from __future__ import annotations

import json
import os
import signal
from collections import Counter

from mam.util.poll import wait_for
from tests.e2e.test_node import node_pid
from tests.helpers.jobs import create_demo
from tests.helpers.mamcli import mam


def receipts(name: str) -> list[dict]:
    return list(reversed(json.loads(mam("routine", "log", name, "--json", "--limit", "200", check=True).stdout)))


def typed(ws, session: dict, job: str) -> int:
    """How many times a brief of `job` reached the demo agent (its conversation's user turns)."""
    path = ws.state / "demo-agent" / "conversations" / f"{session['conversation_id']}.json"
    turns = json.loads(path.read_text())["turns"]
    return sum(1 for t in turns if t["role"] == "user" and job in t["text"])


def job_state(job: str) -> str:
    return str(json.loads(mam("job", "status", job, "--json", check=True).stdout)["state"])


def test_add_starts_the_node_and_a_node_killed_mid_tick_is_replaced_without_a_second_fire(wired):
    s = create_demo("w")
    brief = "demo-sleep: 4\nthe routine's work"
    added = mam("routine", "add", "nightly", "--target", "w", "--brief", brief, "--cron", "0 3 * * *", "--json")
    assert added.returncode == 0, added.stderr
    try:
        first = wait_for(lambda: node_pid(wired), timeout=30, message="routine add started no node")
        ran = json.loads(mam("routine", "run", "nightly", "--json", check=True).stdout)
        job = ran["job"]
        assert ran["status"] == "firing" and job == f"rt-{ran['n']}-nightly"
        wait_for(lambda: job_state(job) == "running", timeout=60, message=f"job {job} never ran")
        os.kill(first, signal.SIGKILL)
        # The next command that needs the node starts another one; its scheduler finds the tick it left firing.
        assert mam("routine", "resume", "nightly").returncode == 0
        second = wait_for(lambda: node_pid(wired), timeout=30, message="no node came back")
        assert second != first
        done = wait_for(
            lambda: (r := receipts("nightly")) and r[-1]["status"] == "done" and r,
            timeout=90,
            message=lambda: f"the tick did not end: {receipts('nightly')}",
        )
        assert [(t["job"], t["outcome"]) for t in done] == [(job, "completed")], done
        assert typed(wired, s, job) == 1
        jobs = json.loads(mam("job", "list", "--json", check=True).stdout)
        assert [j["id"] for j in jobs] == [job]
    finally:
        mam("node", "stop")


def test_ticks_keep_coming_across_node_kills_and_none_fires_twice(wired, monkeypatch):
    # A node killed between a tick's claim and its paste leaves the job `delivering`: the next node's attempt
    # takes it over and never pastes again, so the job ends by its start deadline (agent_blocked) unless the
    # brief was in the pane. A short one keeps the test short (the nodes inherit it).
    monkeypatch.setenv("MAM_START_DEADLINE_S", "20")
    s = create_demo("w")
    added = mam("routine", "add", "often", "--target", "w", "--brief", "demo-sleep: 1\npoll", "--every", "2s")
    assert added.returncode == 0, added.stderr
    try:
        for _ in range(2):
            pid = wait_for(lambda: node_pid(wired), timeout=30, message="no node runs")
            seen = len([t for t in receipts("often") if t["job"]])
            wait_for(
                lambda seen=seen: len([t for t in receipts("often") if t["job"]]) > seen,
                timeout=60,
                message="no tick fired",
            )
            os.kill(pid, signal.SIGKILL)  # mid-tick: its job was just delegated
            assert mam("routine", "resume", "often").returncode == 0  # starts the next node
        wait_for(lambda: node_pid(wired), timeout=30, message="no node came back")
        mam("routine", "pause", "often", check=True)
        rows = wait_for(
            lambda: (r := receipts("often")) and all(t["status"] not in ("firing", "pending") for t in r) and r,
            timeout=90,
            message=lambda: f"ticks still open: {receipts('often')}",
        )
    finally:
        mam("node", "stop")
    fired = [t for t in rows if t["job"]]
    assert len(fired) >= 2, rows
    assert len({t["key"] for t in rows}) == len(rows)  # each tick decided once
    jobs = json.loads(mam("job", "list", "--json", "--limit", "500", check=True).stdout)
    assert Counter(j["id"] for j in jobs) == Counter(t["job"] for t in fired)  # one job per fired tick, no other
    assert all(typed(wired, s, t["job"]) == 1 for t in fired if t["outcome"] == "completed")
    assert all(typed(wired, s, t["job"]) <= 1 for t in fired)  # a brief reaches the agent at most once
    # A node killed before the paste leaves the job to whoever comes first in the next node: the scheduler takes
    # it over and delivers it, or the monitor cancels it (wrapper_died, never typed). Either way: once at most.
    assert all(t["outcome"] in ("completed", "failed", "cancelled") for t in fired), fired
    assert all(typed(wired, s, t["job"]) == 0 for t in fired if t["outcome"] == "cancelled")


def test_the_node_serves_a_routines_webhook_on_loopback_and_fires_one_tick_per_delivery(wired):
    import time
    import urllib.error
    import urllib.request

    from mam.routines.webhook import signature

    s = create_demo("w")
    added = mam("routine", "add", "hook", "--target", "w", "--brief", "on a push", "--on-webhook", "--json")
    assert added.returncode == 0, added.stderr
    out = json.loads(added.stdout)
    assert out["url"].startswith("http://127.0.0.1:") and len(out["secret"]) == 64
    assert out["secret"] not in mam("routine", "list", "--json", check=True).stdout
    body = json.dumps({"text": "main moved to 1a2b3c"}).encode()

    def post(delivery: str) -> int:
        stamp = str(int(time.time()))
        headers = {
            "X-Mam-Timestamp": stamp,
            "X-Mam-Delivery": delivery,
            "X-Mam-Signature": signature(out["secret"], stamp, delivery, body),
        }
        req = urllib.request.Request(out["url"], data=body, headers=headers, method="POST")
        try:
            with urllib.request.urlopen(req, timeout=10) as answer:
                return int(answer.status)
        except urllib.error.HTTPError as e:
            return int(e.code)
        except OSError:
            return 0  # not listening yet

    try:
        assert wait_for(lambda: post("push-1") or None, timeout=30, message="no webhook endpoint") == 202
        assert post("push-1") == 409  # the same delivery again: refused
        done = wait_for(
            lambda: (r := [t for t in receipts("hook") if t["job"]]) and r[0]["status"] == "done" and r,
            timeout=90,
            message=lambda: f"the webhook's tick did not end: {receipts('hook')}",
        )
        assert len(done) == 1 and done[0]["outcome"] == "completed" and done[0]["trigger"] == "webhook"
        assert typed(wired, s, done[0]["job"]) == 1
        assert [t["reason"] for t in receipts("hook") if t["status"] == "refused"] == ["replayed"]
        log = (wired.state / "run" / "node.log").read_text()
        assert "routine webhook: deliveries refused for 'hook': 1 (replayed 1)" in log and out["secret"] not in log
    finally:
        mam("node", "stop")


def test_a_webhook_port_another_program_holds_is_kept_and_said_down_until_it_is_free(wired):
    """Issue 39, item 4: the node moved to a new port and said so only in its log; senders kept the old URL and
    got 202 from whoever held it. Now the URL never moves; `mam routine list`, `mam status` and `mam doctor`
    say the webhook is down and why, and once the port is free the node serves it again."""
    import socket
    import urllib.error
    import urllib.request

    create_demo("w")
    added = json.loads(
        mam("routine", "add", "hook", "--target", "w", "--brief", "b", "--on-webhook", "--json", check=True).stdout
    )
    url, port = added["url"], int(added["url"].split(":")[2].split("/")[0])

    def answer() -> int:
        req = urllib.request.Request(url, data=b"{}", method="POST")
        try:
            with urllib.request.urlopen(req, timeout=10) as got:
                return int(got.status)
        except urllib.error.HTTPError as e:
            return int(e.code)
        except OSError:
            return 0

    def listed() -> dict:  # type: ignore[type-arg]
        return json.loads(mam("routine", "list", "--json", check=True).stdout)[0]  # type: ignore[no-any-return]

    try:
        assert wait_for(lambda: answer() or None, timeout=30, message="no webhook endpoint") == 401
        mam("node", "stop", check=True)  # returns once the node has ended: its webhook port is free
        squatter = socket.socket()
        squatter.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        squatter.bind(("127.0.0.1", port))
        squatter.listen(8)
        try:
            assert mam("routine", "resume", "hook").returncode == 0  # starts a node
            down = wait_for(lambda: listed()["webhook_down"], timeout=30, message="the webhook never said down")
            assert f"127.0.0.1:{port} is held by another program" in down and listed()["url"] == url
            text = mam("routine", "list", check=True).stdout
            assert f"webhook DOWN ({url}): 127.0.0.1:{port} is held by another program" in text
            status = mam("status")
            assert (
                status.returncode == 0 and "routine webhooks are down" in status.stderr and str(port) in status.stderr
            )
            checks = {c["name"]: c for c in json.loads(mam("doctor", "--json").stdout)["checks"]}
            assert checks["routine webhook"]["status"] == "fail" and str(port) in checks["routine webhook"]["detail"]
        finally:
            squatter.close()
        # Free again: the node takes its port back within its retry, and the URL reaches the routine.
        wait_for(lambda: listed()["webhook_down"] is None, timeout=30, message="the webhook never came back")
        assert answer() == 401 and listed()["url"] == url
        assert "routine webhooks are down" not in mam("status").stderr
    finally:
        mam("node", "stop")
