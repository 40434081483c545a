"""`mam job fanout` over demo sessions in real panes and a real broker; `mam job replay` of every job it ran."""

from __future__ import annotations

import json
import signal

import pytest

from tests.e2e.test_node import node_pid, owner_pid
from tests.helpers.jobs import FAST
from tests.helpers.mamcli import mam, spawn_mam


@pytest.fixture
def on_mosquitto(workspace, mosquitto_broker, monkeypatch):
    for key, value in {**mosquitto_broker.env(), **FAST}.items():
        monkeypatch.setenv(key, value)
    return workspace


def _sessions(ws, answers: dict[str, dict[str, str]]) -> None:
    for name, env in answers.items():
        mam(
            "-w", str(ws.root), "session", "create", "--agent", "demo", "--role", "voter", "--session", name,
            env=env, check=True,
        )  # fmt: skip


def _stop(ws, names) -> None:
    for name in names:
        mam("-w", str(ws.root), "session", "stop", "--session", name)


def _replays_equal(ws, job_id: str) -> None:
    proc = mam("-w", str(ws.root), "job", "replay", job_id, "--json")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    out = json.loads(proc.stdout)
    assert out["equal"] is True and out["derived"]["state"] == out["recorded"]["state"]


def test_vote_over_three_sessions_answering_a_a_b_reports_a_with_every_provenance(on_mosquitto):
    ws = on_mosquitto
    answers = {"v1": {"MAM_DEMO_ANSWER": "A"}, "v2": {"MAM_DEMO_ANSWER": "A"}, "v3": {"MAM_DEMO_ANSWER": "B"}}
    _sessions(ws, answers)
    try:
        proc = mam(
            "-w", str(ws.root), "job", "fanout", "--targets", "v1,v2,v3", "--brief", "Pick A or B.",
            "--aggregate", "vote", "--json", timeout=180,
        )  # fmt: skip
        assert proc.returncode == 0, proc.stdout + proc.stderr
        out = json.loads(proc.stdout)
        assert (out["decided"], out["outcome"], out["winner"], out["votes"]) == (
            True,
            "majority",
            "A",
            {"A": 2, "B": 1},
        )
        jobs = {j["target"]: j for j in out["jobs"]}
        assert set(jobs) == {"v1", "v2", "v3"}
        pid = node_pid(ws)  # `mam job fanout` is served by the workspace's node: its jobs are the node's
        assert pid and {owner_pid(ws, j["job_id"]) for j in out["jobs"]} == {pid}
        for name, env in answers.items():
            j = jobs[name]
            assert (j["state"], j["vote"]) == ("completed", env["MAM_DEMO_ANSWER"])
            assert j["result"].splitlines()[-1] == env["MAM_DEMO_ANSWER"]
            status = json.loads(mam("-w", str(ws.root), "job", "status", j["job_id"], "--json", check=True).stdout)
            assert (status["session"], status["state"]) == (name, "completed")
            _replays_equal(ws, j["job_id"])
        # A tie is named, not decided: exit 1.
        proc = mam(
            "-w", str(ws.root), "job", "fanout", "--targets", "v1,v3", "--brief", "Again.", "--aggregate", "vote",
            "--json", timeout=180,
        )  # fmt: skip
        assert proc.returncode == 1, proc.stdout + proc.stderr
        tie = json.loads(proc.stdout)
        assert (tie["decided"], tie["outcome"], tie["winner"]) == (False, "tie", None)
        assert len(tie["jobs"]) == 2 and all(j["job_id"] and j["state"] == "completed" for j in tie["jobs"])
        # Text: one line per target (its job id, state, vote, first line of its result), then the aggregate.
        proc = mam("-w", str(ws.root), "job", "fanout", "--targets", "v2,v3", "--brief", "Once more.", timeout=180)
        assert proc.returncode == 0, proc.stderr
        lines = proc.stdout.splitlines()
        assert [line.split()[0] for line in lines] == ["v2", "v3", "all:"] and lines[-1] == "all: completed"
        assert "vote 'A'" in lines[0] and "vote 'B'" in lines[1] and all(" job-" in line for line in lines[:2])
    finally:
        _stop(ws, answers)


def test_first_takes_the_first_completed_and_cancels_the_rest(on_mosquitto):
    ws = on_mosquitto
    sessions = {"quick": {}, "slow": {"MAM_DEMO_BEHAVIOUR": "slow", "MAM_DEMO_SLEEP_S": "120"}}
    _sessions(ws, sessions)
    try:
        proc = mam(
            "-w", str(ws.root), "job", "fanout", "--targets", "slow,quick", "--brief", "Go.", "--aggregate", "first",
            "--json", timeout=180,
        )  # fmt: skip
        assert proc.returncode == 0, proc.stdout + proc.stderr
        out = json.loads(proc.stdout)
        jobs = {j["target"]: j for j in out["jobs"]}
        assert (out["outcome"], out["winner"]) == ("first_completed", jobs["quick"]["job_id"])
        assert jobs["quick"]["state"] == "completed"
        assert (jobs["slow"]["state"], jobs["slow"]["reason"]) == ("cancelled", "cancelled_by_user")
        for j in jobs.values():
            _replays_equal(ws, j["job_id"])
    finally:
        _stop(ws, sessions)


def test_bad_fanout_options_exit_2_and_delegate_nothing(on_mosquitto):
    ws = on_mosquitto
    for args in (
        ["--targets", "a,a", "--brief", "x"],
        ["--targets", "a/b", "--brief", "x"],
        ["--targets", "a", "--brief", "x", "--brief-file", "f"],
        ["--targets", "a", "--brief", "x", "--aggregate", "mean"],
    ):
        proc = mam("-w", str(ws.root), "job", "fanout", *args)
        assert proc.returncode == 2, (args, proc.stderr)
    assert json.loads(mam("-w", str(ws.root), "job", "list", "--json", check=True).stdout) == []


def test_interrupted_fanout_exits_130_and_leaves_its_jobs_open(on_mosquitto, poll):
    ws = on_mosquitto
    sessions = {"long1": {"MAM_DEMO_BEHAVIOUR": "slow", "MAM_DEMO_SLEEP_S": "120"}}
    _sessions(ws, sessions)
    proc = spawn_mam("-w", str(ws.root), "job", "fanout", "--targets", "long1", "--brief", "Take your time.")
    try:

        def running() -> list[dict]:
            jobs = json.loads(mam("-w", str(ws.root), "job", "list", "--json", check=True).stdout)
            return [j for j in jobs if j["state"] == "running"]

        job = poll(running, timeout=60, message="the fan-out's job never ran")[0]
        proc.send_signal(signal.SIGINT)
        _out, err = proc.communicate(timeout=60)
        assert proc.returncode == 130, err
        assert job["id"] in err and "mam job wait" in err
        status = json.loads(mam("-w", str(ws.root), "job", "status", job["id"], "--json", check=True).stdout)
        assert status["state"] == "running"  # not ended by the interrupt
        mam("-w", str(ws.root), "job", "cancel", job["id"], check=True)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        _stop(ws, sessions)
