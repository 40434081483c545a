"""Pause and resume (mam/jobs/pause.py), end to end: real tmux, the demo agent, a real broker, `mam job
delegate` as a real process that keeps waiting while its job is paused and exits with the job's final code.

Each mode holds: nothing is typed while paused (the demo agent records every message it receives), the
agent's process is as the mode says (safe: working on; quick: its turn interrupted by Escape, the process
alive; hard: stopped, its conversation kept), and resume carries the same job to `completed` exit 0 with the
brief itself typed once. The workspace's hold types nothing, through a restart of everything."""

from __future__ import annotations

import json
import subprocess
import time

import pytest

from mam.util.poll import wait_for
from mam.view.feed import Feed
from mam.workspace import Workspace
from tests.e2e.test_interrupt import spawn_delegate, state, user_turns
from tests.e2e.test_node import node_pid, open_job
from tests.helpers.jobs import audit_kinds, create_demo, replayed_state
from tests.helpers.mamcli import mam

SHORT = ["--start-deadline", "20", "--heartbeat", "1"]


def status(job_id: str) -> dict:
    return json.loads(mam("job", "status", job_id, "--json", check=True).stdout)


def session_row(name: str) -> dict:
    rows = json.loads(mam("session", "status", "--json", check=True).stdout)
    return next(r for r in rows if r["name"] == name)


def agent_turns(ws: Workspace, session: dict) -> list[dict]:
    path = ws.state / "demo-agent" / "conversations" / f"{session['conversation_id']}.json"
    return list(json.loads(path.read_text())["turns"])


def finish(proc: subprocess.Popen[str], timeout: float = 90) -> tuple[str, str]:
    try:
        return proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.communicate()
        raise


def resumed_briefs(ws: Workspace, session: dict, job_id: str) -> int:
    return sum(
        1
        for t in agent_turns(ws, session)
        if t["role"] == "user" and job_id in t["text"] and "was paused and is resumed now" in t["text"]
    )


def stays_paused_past_its_deadlines(job_id: str) -> None:
    """Watch the job until its liveness window (K x N after its last event) and its start deadline have both
    passed by a margin, failing at once if it leaves `paused` meanwhile: no deadline runs while paused."""
    job = status(job_id)
    last = (job.get("last_event_ms") or job.get("delivered_ms") or 0) / 1000
    until = last + max(job["heartbeat_ms"] * job["heartbeat_k"], job["start_deadline_ms"] / 4) / 1000 + 2.0

    def past() -> bool:
        assert status(job_id)["state"] == "paused"
        return time.time() > until

    wait_for(past, timeout=until - time.time() + 30, interval=0.5)


@pytest.mark.parametrize("mode", ["quick", "hard"])
def test_quick_and_hard_hold_and_resume_carries_the_same_job_to_completed(wired, mode):
    s = create_demo("p")
    go = wired.root / "go"  # the turn goes on until the test lets it (see the safe pause's test)
    brief = f"demo-await: {go}\ndemo-write: out.txt :: done after the pause"
    proc = spawn_delegate("--target", "p", "--brief", brief, "--json", *SHORT)
    try:
        job = open_job(wired)  # running: delivered and started
        paused = json.loads(mam("job", "pause", job, "--mode", mode, "--by", "tester", "--json", check=True).stdout)
        assert paused["state"] == "paused"
        assert paused["paused"]["mode"] == mode and paused["paused"]["by"] == "tester"
        assert paused["paused"]["since"] > 0
        wait_for(  # the turn was interrupted (Escape), never finished
            lambda: (
                any(t.get("work") == "interrupted" for t in agent_turns(wired, s))
                or session_row("p")["status"] == "stopped"
            ),
            timeout=20,
            message="the demo agent's turn was not interrupted",
        )
        row = session_row("p")
        assert row["paused"] == {"job": job, **paused["paused"]}  # `mam status --json` says so too
        top = mam("top", "--snapshot", "--width", "200", check=True).stdout
        assert f"paused ({mode})" in top
        feed = Feed(wired, job=job)  # what `mam tail --job ID --all` prints (it follows for ever)
        try:
            said = feed.read()
        finally:
            feed.close()
        assert any(x.type == "paused" and f"{mode} by tester" in x.message for x in said), said
        if mode == "quick":  # the agent lives on
            assert row["status"] == "running"
        else:  # stopped as `session stop` stops it, its conversation kept
            assert row["status"] == "stopped" and row["conversation_id"] == s["conversation_id"]
        turns_before = len([t for t in agent_turns(wired, s) if t["role"] == "user"])
        stays_paused_past_its_deadlines(job)
        assert len([t for t in agent_turns(wired, s) if t["role"] == "user"]) == turns_before  # nothing typed
        assert not (wired.root / "out.txt").exists()
        assert proc.poll() is None  # the delegate still waits
        resumed = json.loads(mam("job", "resume", job, "--by", "tester", "--json", check=True).stdout)
        assert resumed["state"] in ("delivered", "running", "completed") and resumed["paused"] is None
        assert resumed["nonce"] != paused["nonce"]
        go.touch()
        out, err = finish(proc)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 0, err
    record = json.loads(out)
    assert record["id"] == job and record["state"] == "completed"
    assert (wired.root / "out.txt").read_text() == "done after the pause\n"
    assert user_turns(wired, s, "demo-write: out.txt") == 1  # the brief itself was typed once
    assert resumed_briefs(wired, s, job) == 1
    assert session_row("p")["status"] == "running"
    assert replayed_state(wired, job).state.value == "completed"
    lines = [line for line in audit_kinds(wired, job) if line.get("kind") == "input"]
    pause_lines = [line for line in lines if line["input"]["input"] == "pause"]
    assert pause_lines and pause_lines[0]["by"] == "tester" and pause_lines[0]["mode"] == mode


def test_a_safe_pause_lets_the_turn_finish_and_its_completed_ends_the_job(wired):
    s = create_demo("f")
    # The turn goes on until the test has paused the job (demo-await), however slow the machine: with a
    # fixed `demo-sleep: 2` a loaded machine let the job complete before `mam job pause` ran.
    go = wired.root / "go"
    brief = f"demo-await: {go}\ndemo-write: f.txt :: finished"
    proc = spawn_delegate("--target", "f", "--brief", brief, "--json", *SHORT)
    try:
        job = open_job(wired)
        assert json.loads(mam("job", "pause", job, "--json", check=True).stdout)["paused"]["mode"] == "safe"
        go.touch()
        out, err = finish(proc)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 0, err
    assert json.loads(out)["state"] == "completed"
    assert (wired.root / "f.txt").read_text() == "finished\n"
    assert not any(t.get("work") == "interrupted" for t in agent_turns(wired, s))
    assert resumed_briefs(wired, s, job) == 0


def test_a_job_paused_before_delivery_is_not_delivered_until_resumed(wired):
    s = create_demo("q")
    go = wired.root / "go"  # the first job runs until the second is paused, however slow the machine
    first = spawn_delegate("--target", "q", "--brief", f"demo-await: {go}", "--json", *SHORT)
    second = None
    try:
        open_job(wired)
        second = spawn_delegate("--target", "q", "--brief", "demo-write: second.txt :: second", "--json", *SHORT)
        waiting = open_job(wired, "pending")
        mam("job", "pause", waiting, check=True)
        go.touch()
        out, err = finish(first)
        assert first.returncode == 0, err
        wait_for(lambda: status(waiting)["state"] == "paused", timeout=10)
        assert user_turns(wired, s, "second.txt") == 0
        assert second.poll() is None
        lower = mam("job", "pause", waiting, "--mode", "safe")  # the same mode: nothing changes
        assert lower.returncode == 0
        mam("job", "pause", waiting, "--mode", "quick", check=True)  # escalates
        back = mam("job", "pause", waiting, "--mode", "safe")
        assert back.returncode == 2 and "only escalates" in back.stderr
        mam("job", "resume", waiting, check=True)
        out, err = finish(second)
    finally:
        for p in (first, second):
            if p is not None and p.poll() is None:
                p.kill()
    assert second.returncode == 0, err
    assert json.loads(out)["state"] == "completed"
    assert user_turns(wired, s, "second.txt") == 1
    assert resumed_briefs(wired, s, waiting) == 0  # never typed before: its own brief, not a resume brief


def test_pause_and_resume_refuse_what_they_cannot_do(wired):
    create_demo("r")
    done = json.loads(mam("job", "delegate", "--target", "r", "--brief", "quick one", "--json", *SHORT).stdout)
    ended = mam("job", "pause", done["id"])
    assert ended.returncode == 5 and "already ended" in ended.stderr
    assert mam("job", "resume", done["id"]).returncode == 5
    assert mam("job", "pause", "job-doesnotexist").returncode == 5
    bad = mam("job", "pause", "../etc", "--mode", "safe")
    assert bad.returncode == 2
    assert mam("job", "pause", done["id"], "--mode", "gentle").returncode == 2
    assert mam("pause").returncode == 2  # the whole workspace needs --all


def test_a_hold_types_nothing_through_a_restart_of_everything(wired):
    s = create_demo("h")
    held = json.loads(mam("pause", "--all", "--by", "ops", "--json", check=True).stdout)
    assert held["hold"]["by"] == "ops"
    proc = spawn_delegate("--target", "h", "--brief", "demo-write: held.txt :: after the hold", "--json", *SHORT)
    try:
        job = open_job(wired, "queued")
        assert status(job)["queued_for"] == "hold"
        # Kill everything: the node (if one serves) and the delegate; then a new delegate takes the job over.
        pid = node_pid(wired)
        if pid:
            import os
            import signal

            os.kill(pid, signal.SIGKILL)
        proc.kill()
        proc.communicate()
        again = spawn_delegate(
            "--target", "h", "--brief", "demo-write: held.txt :: after the hold", "--json", *SHORT
        )  # fmt: skip
        try:
            wait_for(
                lambda: any(
                    j["state"] == "queued" and j["queued_for"] == "hold"
                    for j in json.loads(mam("job", "list", "--json", check=True).stdout)
                    if j["id"] != job
                ),
                timeout=30,
                message="the second delegation is not held",
            )
            assert user_turns(wired, s, "held.txt") == 0
            released = json.loads(mam("resume", "--all", "--json", check=True).stdout)
            assert released["released"] is True
            out, err = finish(again)
        finally:
            if again.poll() is None:
                again.kill()
        assert again.returncode == 0, err
        assert json.loads(out)["state"] == "completed"
        assert user_turns(wired, s, "held.txt") == 1
    finally:
        if proc.poll() is None:
            proc.kill()
    assert state(job) in ("cancelled", "completed")


def test_resume_all_resumes_every_hard_paused_job_each_once(wired):
    """Two sessions' jobs hard-paused (each agent stopped): `mam resume --all` relaunches both (side by
    side: each waits for its agent to be ready) and each job completes with its resume brief typed once."""
    sessions = {name: create_demo(name) for name in ("ra", "rb")}
    # Each turn goes on until the test lets it (demo-await), before the pause and after the resume (a resumed
    # demo agent works its job's own brief again): a fixed sleep let a loaded machine complete `rb`'s job
    # before `mam job pause` reached it.
    go = {name: wired.root / f"go-{name}" for name in sessions}
    procs = {
        name: spawn_delegate("--target", name, "--brief", f"demo-await: {go[name]}\ndemo-write: {name}.txt :: {name}",
                             "--json", *SHORT)
        for name in sessions
    }  # fmt: skip
    try:
        jobs = {}
        for name in sessions:
            wait_for(lambda n=name: any(r["session"] == n and r["state"] == "running" for r in listed()), timeout=30)
            jobs[name] = next(r["id"] for r in listed() if r["session"] == name and r["state"] == "running")
            mam("job", "pause", jobs[name], "--mode", "hard", "--by", "tester", check=True)
        for name in sessions:
            wait_for(lambda n=name: session_row(n)["status"] == "stopped", timeout=30, message=f"{name} not stopped")
        out = json.loads(mam("resume", "--all", "--by", "tester", "--json", check=True).stdout)
        assert sorted(out["resumed"]) == sorted(jobs.values()) and out["failed"] == [], out
        for path in go.values():
            path.touch()
        for name, proc in procs.items():
            stdout, err = finish(proc)
            assert proc.returncode == 0, err
            assert json.loads(stdout)["state"] == "completed"
            assert (wired.root / f"{name}.txt").read_text() == f"{name}\n"
            assert resumed_briefs(wired, sessions[name], jobs[name]) == 1
    finally:
        for proc in procs.values():
            if proc.poll() is None:
                proc.kill()


def listed() -> list[dict]:
    return json.loads(mam("job", "list", "--json", check=True).stdout)
