"""Org mode end to end (issue 42): roles played by demo agents in real tmux panes, tasks woken by the real node
(started by `mam task add`) over a real Mosquitto. A task runs on its role's session; one blocked by another
gets no job until that one is done; a breaker trips and holds; a daily cap holds; a disposition parks a task;
a node killed mid-task never gives a task two jobs. No sleeps: every wait polls with a deadline."""

from __future__ import annotations

import json
import os
import signal
import sys
from pathlib import Path
from typing import Any

import pytest

from mam.util.poll import wait_for
from tests.e2e.test_node import node_pid
from tests.helpers.jobs import FAST, create_demo
from tests.helpers.mamcli import mam, mam_json

CATCHER = """import sys
data = sys.stdin.read()
with open(sys.argv[1], "a") as f:
    f.write(data.replace("\\n", " ") + "\\n")
"""


@pytest.fixture
def org(workspace, mosquitto_broker, monkeypatch, tmp_path):
    """A workspace wired to Mosquitto, with MAM_NOTIFY writing each push to `notified.jsonl`; the node (and
    whatever it started) stopped afterwards."""
    catcher = tmp_path / "catcher.py"
    catcher.write_text(CATCHER)
    env = {**mosquitto_broker.env(), **FAST, "MAM_NOTIFY": f"{sys.executable} {catcher} {tmp_path / 'notified.jsonl'}"}
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    yield workspace
    mam("node", "stop")


def pushes(tmp_path: Path, kind: str) -> list[dict[str, Any]]:
    path = tmp_path / "notified.jsonl"
    lines = path.read_text().splitlines() if path.exists() else []
    return [m for m in map(json.loads, lines) if m["kind"] == kind]


def add(title: str, role: str, *extra: str) -> str:
    proc = mam("task", "add", title, "--role", role, *extra, check=True)
    return proc.stdout.strip()


def show(task: str) -> dict[str, Any]:
    return dict(mam_json("task", "show", task))


def until(task: str, *states: str, timeout: float = 90) -> dict[str, Any]:
    return dict(
        wait_for(
            lambda: (t := show(task))["state"] in states and t,
            timeout=timeout,
            message=lambda: f"task {task} is not {'/'.join(states)}: {show(task)}",
        )
    )


def job(job_id: str) -> dict[str, Any]:
    return dict(mam_json("job", "status", job_id))


def job_state(job_id: str) -> str | None:
    """The job's state; None while it does not exist yet (the node makes a task's job when it wakes it)."""
    proc = mam("job", "status", job_id, "--json")
    if proc.returncode == 5 and "no job" in proc.stderr:
        return None
    assert proc.returncode == 0, proc.stderr
    return str(json.loads(proc.stdout)["state"])


def typed(ws, session: dict[str, Any], job_id: str) -> int:
    """How many times a brief of `job_id` reached the demo agent (its conversation's user turns)."""
    path = ws.state / "demo-agent" / "conversations" / f"{session['conversation_id']}.json"
    turns = json.loads(path.read_text())["turns"]
    return sum(1 for t in turns if t["role"] == "user" and f"mam job {job_id}." in t["text"])


def test_a_task_runs_on_its_roles_session_and_ends_done(org):
    lead, dev = create_demo("lead"), create_demo("dev-1")
    mam("role", "add", "lead", "--session", "lead", check=True)
    added = mam_json("role", "add", "dev", "--session", "dev-1", "--reports-to", "lead")
    assert added["reports_to"] == "lead" and added["breaker"] == {"threshold": 3, "failures": 0, "tripped": False}
    assert added["daily_runs"] is None and added["runs_today"] == 0
    parent = add("Ship the greeting", "lead", "--brief", "demo-disposition: review")
    out = mam_json("task", "add", "Write hello.txt", "--role", "dev", "--parent", parent, "--brief",
                   "demo-write: hello.txt :: hello")  # fmt: skip
    task = out["id"]
    assert (out["state"], out["parent"], out["role"], out["job"], out["jobs"]) == ("todo", parent, "dev", None, [])
    done = until(task, "done")
    assert done["job"] == f"{task}-r1" and done["jobs"] == [done["job"]] and done["queued_for"] == ""
    assert [w["reason"] for w in done["wakes"]] == ["assigned"] and done["wait"] is None
    row = job(done["job"])
    assert (row["session"], row["state"], row["kind"]) == ("dev-1", "completed", "task")
    assert (org.root / "hello.txt").read_text() == "hello\n"
    assert typed(org, dev, done["job"]) == 1 and typed(org, lead, done["job"]) == 0
    path = org.state / "demo-agent" / "conversations" / f"{dev['conversation_id']}.json"
    brief = next(t["text"] for t in json.loads(path.read_text())["turns"] if done["job"] in t["text"])
    assert "You play role dev in this workspace's organisation; you report to lead." in brief
    assert f"Task {task}: Write hello.txt" in brief and f"It is part of task {parent}: Ship the greeting" in brief
    assert f"mam event completed --job {done['job']} --disposition review" in brief
    assert mam_json("role", "show", "dev")["runs_today"] == 1
    listed = mam_json("task", "list")
    assert [(t["id"], t["depth"]) for t in listed] == [(parent, 0), (task, 1)]
    assert listed[0]["children"] == [task]


def test_a_task_blocked_by_another_gets_no_job_until_that_one_is_done_then_runs(org):
    create_demo("w")
    mam("role", "add", "dev", "--session", "w", check=True)
    first = add("Draft", "dev", "--brief", "demo-disposition: review")
    second = add("Publish", "dev", "--blocked-by", first)
    reviewed = until(first, "in_review")
    assert len(reviewed["jobs"]) == 1
    # The job that put the first task in review has ended, and the second is held by its blocker: no job.
    held = show(second)
    assert (held["state"], held["queued_for"], held["job"], held["blocked_by"]) == ("todo", "blockers", None, [first])
    assert [j["id"] for j in mam_json("job", "list")] == [reviewed["job"]]
    assert mam("task", "done", first, check=True).stdout.strip() == f"task {first}: marked done, now done"
    ran = until(second, "done")
    assert [w["reason"] for w in ran["wakes"]] == ["blockers_resolved"] and len(ran["jobs"]) == 1
    # Reopened with a note, it is woken again (its brief carries the note), and again it waits in review.
    mam("task", "reopen", first, "--note", "add a second line", check=True)
    again = until(first, "in_review")
    assert [w["reason"] for w in again["wakes"]] == ["assigned", "reopened"]
    assert again["jobs"] == [f"{first}-r1", f"{first}-r2"]


def test_a_role_with_breaker_2_trips_after_two_failed_jobs_and_holds_its_next_task_until_reset(org, tmp_path):
    create_demo("w")
    mam("role", "add", "dev", "--session", "w", "--breaker", "2", check=True)
    f1 = add("Fail once", "dev", "--brief", "demo-behaviour: error")
    f2 = add("Fail twice", "dev", "--brief", "demo-behaviour: error")
    ok = add("Then work", "dev")
    until(f1, "failed")
    assert mam_json("role", "show", "dev")["breaker"]["failures"] in (1, 2)
    until(f2, "failed")
    role = mam_json("role", "show", "dev")
    assert role["breaker"] == {"threshold": 2, "failures": 2, "tripped": True}
    # The trip was recorded with the second failure, before the next task could be woken: it has no job.
    held = show(ok)
    assert (held["state"], held["queued_for"], held["job"]) == ("todo", "breaker", None)
    assert sorted(j["id"] for j in mam_json("job", "list")) == sorted([f"{f1}-r1", f"{f2}-r1"])
    told = wait_for(lambda: pushes(tmp_path, "breaker_tripped"), timeout=30, message="no breaker_tripped push")
    assert told[0]["role"] == "dev" and told[0]["failures"] == 2 and told[0]["task"] == f2
    assert "breaker TRIPPED" in mam("role", "list", check=True).stdout
    assert mam("role", "reset", "dev", check=True).returncode == 0
    ran = until(ok, "done")
    assert [w["reason"] for w in ran["wakes"]] == ["assigned"]
    assert mam_json("role", "show", "dev")["breaker"] == {"threshold": 2, "failures": 0, "tripped": False}


def test_a_role_with_daily_runs_1_holds_its_second_task_with_queued_for_daily_cap(org, tmp_path, monkeypatch):
    monkeypatch.setenv("MAM_ORG_DAILY_RUNS", "2")  # the workspace's cap: its node starts with it
    create_demo("w")
    create_demo("v")
    mam("role", "add", "dev", "--session", "w", "--daily-runs", "1", check=True)
    mam("role", "add", "ops", "--session", "v", check=True)
    first, second = add("One", "dev"), add("Two", "dev")
    until(first, "done")
    held = wait_for(
        lambda: (t := show(second))["queued_for"] == "daily_cap" and t,
        timeout=30,
        message=lambda: f"{second} is not held by the daily cap: {show(second)}",
    )
    assert (held["state"], held["job"]) == ("todo", None)
    assert mam_json("role", "show", "dev")["runs_today"] == 1
    told = wait_for(lambda: pushes(tmp_path, "daily_cap_reached"), timeout=30, message="no daily_cap_reached push")
    assert told[0]["role"] == "dev" and told[0]["day"]
    assert "daily_cap" in mam("task", "list", check=True).stdout
    # ops has no cap of its own: its first task runs (the workspace's second run today), its second waits.
    third, fourth = add("Three", "ops"), add("Four", "ops")
    until(third, "done")
    held = wait_for(
        lambda: (t := show(fourth))["queued_for"] == "daily_cap" and t,
        timeout=30,
        message=lambda: f"{fourth} is not held by MAM_ORG_DAILY_RUNS: {show(fourth)}",
    )
    assert held["job"] is None and mam_json("role", "show", "ops")["daily_runs"] is None


def test_disposition_blocked_waiting_on_a_task_parks_it_until_that_task_is_done(org):
    create_demo("lead")
    create_demo("dev-1")
    mam("role", "add", "lead", "--session", "lead", check=True)
    mam("role", "add", "dev", "--session", "dev-1", "--reports-to", "lead", check=True)
    spec = add("Write the spec", "lead", "--brief", "demo-disposition: review")
    until(spec, "in_review")
    build = add("Build it", "dev", "--brief", f"demo-disposition: blocked {spec}; done")
    parked = until(build, "blocked")
    assert parked["wait"] == spec and parked["queued_for"] == "" and len(parked["jobs"]) == 1
    assert job(parked["job"])["disposition"] == "blocked" and job(parked["job"])["waiting_on"] == spec
    # A bad disposition is refused before anything is sent (the job's events stay as they were).
    seen = len(mam_json("job", "log", parked["job"]))
    wrong = mam("event", "completed", "--job", parked["job"], "--waiting-on", spec)
    assert wrong.returncode == 2 and "--waiting-on goes with --disposition blocked" in wrong.stderr
    nowhere = mam("event", "completed", "--job", parked["job"], "--disposition", "blocked", "--waiting-on", "t-999")
    assert nowhere.returncode == 5 and "no such task" in nowhere.stderr
    assert len(mam_json("job", "log", parked["job"])) == seen
    mam("task", "done", spec, check=True)
    ran = until(build, "done")
    assert [w["reason"] for w in ran["wakes"]] == ["assigned", "unblocked"] and len(ran["jobs"]) == 2
    assert [w["task_state"] for w in ran["wakes"]] == ["blocked", "done"]


def test_a_node_killed_mid_task_never_gives_the_task_two_jobs(org):
    s = create_demo("w")
    mam("role", "add", "dev", "--session", "w", check=True)
    other = create_demo("v")
    mam("role", "add", "ops", "--session", "v", check=True)
    # The turn lasts until the node is killed (demo-await), however slow the machine: with a fixed sleep a
    # loaded machine could end the job before the test saw it running.
    go = org.root / "go"
    task = add("Slow work", "dev", "--brief", f"demo-await: {go}")
    job_id = f"{task}-r1"
    first = wait_for(lambda: node_pid(org), timeout=30, message="task add started no node")
    wait_for(lambda: job_state(job_id) == "running", timeout=60, message="never ran")
    os.kill(first, signal.SIGKILL)
    go.touch()
    # The next command that needs a node starts one; its org scheduler finds the run its predecessor left.
    later = add("Later work", "ops", "--blocked-by", task)
    second = wait_for(lambda: node_pid(org), timeout=30, message="no node came back")
    assert second != first
    done = until(task, "done")
    assert done["jobs"] == [job_id] and typed(org, s, job_id) == 1
    assert until(later, "done")["jobs"] == [f"{later}-r1"] and typed(org, other, f"{later}-r1") == 1
    assert sorted(j["id"] for j in mam_json("job", "list")) == sorted([job_id, f"{later}-r1"])


def test_bad_input_is_refused_with_its_exit_code_and_writes_nothing(org):
    create_demo("w")
    assert mam("role", "add", "Bad Role", "--session", "w").returncode == 2
    assert mam("role", "add", "dev", "--session", "ghost").returncode == 5
    assert mam("role", "add", "dev", "--session", "w", "--reports-to", "ghost").returncode == 5
    assert mam("role", "add", "dev", "--session", "w", "--breaker", "0").returncode == 2
    assert mam_json("role", "list") == []
    mam("role", "add", "dev", "--session", "w", check=True)
    assert mam("role", "add", "dev", "--session", "w").returncode == 2
    assert mam("task", "add", "x", "--role", "ghost").returncode == 5
    assert mam("task", "add", "x", "--role", "dev", "--blocked-by", "t-77").returncode == 5
    assert mam("task", "add", "x", "--role", "dev", "--parent", "../etc").returncode == 2
    assert mam("task", "add", "two\nlines", "--role", "dev").returncode == 2
    assert mam("task", "add", "x\x1b[31m", "--role", "dev").returncode == 2
    assert mam_json("task", "list") == []
    assert mam("task", "show", "t-1").returncode == 5
    assert mam("task", "done", "t-1").returncode == 5
    keyed = add("Once", "dev", "--idempotency-key", "plan:1", "--brief", "demo-disposition: review")
    assert add("Once", "dev", "--idempotency-key", "plan:1", "--brief", "demo-disposition: review") == keyed
    assert mam("task", "add", "Other", "--role", "dev", "--idempotency-key", "plan:1").returncode == 2
    assert [t["id"] for t in mam_json("task", "list")] == [keyed]
    until(keyed, "in_review")
    assert mam("role", "remove", "dev").returncode == 5  # a task of it is left to do
    assert mam("task", "reopen", keyed, "--note", "again").returncode == 0
    cancelled = mam("task", "cancel", keyed, check=True)
    assert cancelled.stdout.strip() == f"task {keyed}: cancelled, now cancelled"
    assert mam("task", "done", keyed).returncode == 5
    assert mam("role", "remove", "dev", check=True).stdout.strip() == "role dev removed"


def test_mam_demo_org_runs_a_lead_and_two_developers_through_a_breaker_and_a_reset(tmp_path):
    """`mam demo --org`: a task with two blocked subtasks, a failure that trips dev-b's breaker (its subtask held,
    no job), a reset, a subtask parked by its disposition and woken again; everything it started is removed."""
    proc = mam("demo", "--org", env={"TMPDIR": str(tmp_path)}, timeout=300)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    out = proc.stdout
    said = [line.split("] ", 1)[1] for line in out.splitlines() if line.startswith("[")]
    for expected in (
        "role dev-b: played by dev-2, reports to lead, breaker trips after 1 failure",
        "task S2 todo (blockers)",
        "task F  failed: job failed",
        "task S2 todo (breaker)",
        "task S3 blocked (waiting on S2): job completed, disposition blocked",
        "task S3 woken (unblocked): job t-5-r2 on dev-1",
        "task P  in_review: job completed, disposition review",
        "task P  done",
    ):
        assert expected in said, (expected, out)
    assert said.index("task S2 todo (breaker)") < said.index(
        "dev-b's breaker is tripped: S2 waits (queued_for breaker); resetting it (mam role reset dev-b)"
    )
    assert not any(line.startswith("task S2 woken") for line in said[: said.index("task S2 todo (breaker)")])
    assert "org demo finished: every task ended as expected" in out
    assert list(tmp_path.glob("mam-demo-*")) == []  # the workspace is removed


def test_a_held_workspace_holds_a_task_until_it_is_released(org):
    create_demo("w")
    mam("role", "add", "dev", "--session", "w", check=True)
    mam("pause", "--all", check=True)
    try:
        task = add("While held", "dev")
        held = show(task)
        assert (held["state"], held["queued_for"], held["job"]) == ("todo", "hold", None)
        assert mam_json("job", "list") == []
    finally:
        mam("resume", "--all", check=True)
    assert until(task, "done")["jobs"] == [f"{task}-r1"]
