"""The governor end to end (issue 17): running-job caps and token budgets, real tmux, demo agents
(judged from their own logs: the work turns of their conversation files), one real broker."""

from __future__ import annotations

import json
import os
import signal
from pathlib import Path

import pytest

from tests.helpers.jobs import FAST, capture, create_demo
from tests.helpers.mamcli import mam, spawn_mam

SHORT = ["--start-deadline", "10", "--heartbeat", "0.5"]


@pytest.fixture
def gov(workspace, mosquitto_broker, monkeypatch):
    """A workspace on Mosquitto (one broker is enough here: the caps live in the registry)."""
    for key, value in {**mosquitto_broker.env(), **FAST}.items():
        monkeypatch.setenv(key, value)
    return workspace


def work_spans(ws, sessions: list[dict]) -> list[tuple[float, float, str]]:
    """(begin, end, job) of every job the demo agents worked on, from their conversation files."""
    spans = []
    for s in sessions:
        path = Path(ws.root) / ".mam" / "demo-agent" / "conversations" / f"{s['conversation_id']}.json"
        begun: dict[str, float] = {}
        for turn in json.loads(path.read_text())["turns"]:
            if turn.get("work") == "begin":
                begun[turn["job"]] = turn["ts"]
            elif turn.get("work") in ("end", "interrupted"):
                spans.append((begun.pop(turn["job"]), turn["ts"], turn["job"]))
    return spans


def peak(spans: list[tuple[float, float, str]]) -> int:
    marks = sorted([(b, 1) for b, _e, _j in spans] + [(e, -1) for _b, e, _j in spans])
    level = top = 0
    for _at, step in marks:
        level += step
        top = max(top, level)
    return top


def finish(procs) -> list[tuple[int, dict]]:
    out = []
    for p in procs:
        stdout, stderr = p.communicate(timeout=120)
        out.append((p.returncode, json.loads(stdout) if stdout.strip() else {"stderr": stderr}))
    return out


def log(job_id: str) -> list[dict]:
    return json.loads(mam("job", "log", job_id, "--json", check=True).stdout)


def kinds(job_id: str) -> list[str]:
    return [line["kind"] for line in log(job_id)]


def held_by(job_id: str) -> list[str]:
    """What kept the job queued, from its audit log (its `queued` transitions)."""
    return [
        line["input"]["waiting_for"]
        for line in log(job_id)
        if line["kind"] == "input" and line["input"]["input"] == "queued"
    ]


def test_a_cap_of_two_holds_four_jobs_to_two_agents_at_once_and_all_complete(gov, monkeypatch):
    monkeypatch.setenv("MAM_MAX_RUNNING_JOBS", "2")
    sessions = [create_demo(f"w{i}") for i in range(4)]
    procs = [
        spawn_mam("job", "delegate", "--json", "--target", s["name"], "--brief", "demo-sleep: 1.5", *SHORT)
        for s in sessions
    ]
    results = finish(procs)
    assert [code for code, _ in results] == [0, 0, 0, 0], results
    spans = work_spans(gov, sessions)
    assert len(spans) == 4 and peak(spans) <= 2, spans
    assert sum(1 for _c, r in results if r.get("queued_ms")) >= 2  # two waited for a slot
    view = json.loads(mam("budget", "--json", check=True).stdout)
    assert view["running"] == 0 and view["queued"] == 0 and view["max_running_jobs"] == 2


def test_a_role_cap_holds_that_role_only(gov, monkeypatch):
    monkeypatch.setenv("MAM_MAX_RUNNING_JOBS_REVIEWER", "1")
    reviewers = [create_demo(f"r{i}", role="reviewer") for i in range(2)]
    create_demo("d0", role="dev")
    procs = [
        spawn_mam("job", "delegate", "--json", "--target", name, "--brief", "demo-sleep: 1", *SHORT)
        for name in ("r0", "r1", "d0")
    ]
    results = finish(procs)
    assert [code for code, _ in results] == [0, 0, 0], results
    assert peak(work_spans(gov, reviewers)) == 1
    assert sorted(held_by(r["id"]) for _c, r in results[:2]) == [[], ["role_slot"]]
    assert held_by(results[2][1]["id"]) == []  # the developer never waited for the reviewers' cap


def test_a_queued_job_whose_wait_ends_is_cancelled_exit_5_and_never_typed(gov, monkeypatch, tmux_server, poll):
    monkeypatch.setenv("MAM_MAX_RUNNING_JOBS", "1")
    create_demo("a")
    b = create_demo("b")
    first = spawn_mam("job", "delegate", "--json", "--target", "a", "--brief", "demo-sleep: 20", *SHORT)
    try:
        poll(lambda: any(j["state"] == "running" for j in json.loads(mam("job", "list", "--json").stdout)), timeout=30)
        second = spawn_mam(
            "job", "delegate", "--json", "--target", "b", "--brief", "never", "--dispatch-wait", "4", *SHORT
        )
        queued = poll(
            lambda: [j for j in json.loads(mam("job", "list", "--json").stdout) if j["state"] == "queued"], timeout=20
        )
        assert queued[0]["queued_for"] == "slot" and queued[0]["session"] == "b"
        ((code, record),) = finish([second])
        assert code == 5 and record["state"] == "cancelled" and record["reason"] == "queue_timeout", record
        assert record["nonce"] not in capture(tmux_server.name, b["pane_id"])
        assert "injected" not in kinds(record["id"])
    finally:
        first.kill()
        first.communicate()


def test_a_spent_lifetime_budget_refuses_exit_6_at_once_and_types_nothing(gov, monkeypatch, tmux_server):
    monkeypatch.setenv("MAM_TOKEN_BUDGET", "1000")
    s = create_demo("w")
    spend = mam(
        "job", "delegate", "--json", "--target", "w", "--brief", "demo-tokens: 1500", "--estimate-tokens", "10", *SHORT
    )
    assert spend.returncode == 0, spend.stderr
    proc = mam("job", "delegate", "--json", "--target", "w", "--brief", "more", "--estimate-tokens", "10", *SHORT)
    record = json.loads(proc.stdout)
    assert proc.returncode == 6 and record["state"] == "cancelled" and record["reason"] == "budget_exhausted", record
    assert record["nonce"] not in capture(tmux_server.name, s["pane_id"])
    view = json.loads(mam("budget", "--json", check=True).stdout)
    lifetime = next(c for c in view["caps"] if c["name"] == "lifetime")
    assert lifetime["committed"] > 1500 and lifetime["reserved"] == 0 and lifetime["remaining"] == 0
    assert "budget_warning" in kinds(json.loads(spend.stdout)["id"])


def test_a_job_past_its_max_tokens_is_interrupted_exit_6_and_the_session_takes_the_next(gov, monkeypatch):
    s = create_demo("w")
    proc = mam(
        "job",
        "delegate",
        "--json",
        "--target",
        "w",
        "--brief",
        "demo-tokens: 5000\ndemo-sleep: 30",
        "--max-tokens",
        "1000",
        *SHORT,
    )
    record = json.loads(proc.stdout)
    assert proc.returncode == 6 and record["state"] == "failed" and record["reason"] == "token_budget", record
    assert "interrupted" in kinds(record["id"])
    spans = work_spans(gov, [s])
    assert spans and spans[0][2] == record["id"]  # its agent stopped working on it (work: interrupted)
    after = mam("job", "delegate", "--json", "--target", "w", "--brief", "demo-write: after.txt :: ok", *SHORT)
    assert after.returncode == 0, after.stdout + after.stderr
    assert (Path(gov.root) / "after.txt").read_text() == "ok\n"


def test_a_sigkilled_wrapper_frees_its_slot_and_its_reservation(gov, monkeypatch, poll):
    monkeypatch.setenv("MAM_MAX_RUNNING_JOBS", "1")
    monkeypatch.setenv("MAM_TOKEN_BUDGET", "1000000")
    create_demo("a")
    create_demo("b")
    killed = spawn_mam("job", "delegate", "--json", "--target", "a", "--brief", "demo-sleep: 60", *SHORT)
    poll(lambda: any(j["state"] == "running" for j in json.loads(mam("job", "list", "--json").stdout)), timeout=30)
    os.kill(killed.pid, signal.SIGKILL)
    killed.communicate()
    proc = mam(
        "job", "delegate", "--json", "--target", "b", "--brief", "after the kill", "--dispatch-wait", "30", *SHORT
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    view = json.loads(mam("budget", "--json", check=True).stdout)
    assert view["running"] == 0 and view["queued"] == 0
    assert all(c["reserved"] == 0 for c in view["caps"]), view
