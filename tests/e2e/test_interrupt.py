"""Interrupting a client never loses work (mam/jobs/follow.py), end to end: real tmux, the demo agent,
a real broker, `mam job delegate` as a real process signalled for real, with and without the
node. The job stays open with the brief typed once, `mam job wait` returns the agent's real
outcome, a job whose agent completed is recorded `completed` whoever closes it, and the next
delegation to the session is not held by the interrupted one."""

from __future__ import annotations

import json
import signal
import subprocess
from pathlib import Path

import pytest

from mam.util.poll import wait_for
from mam.workspace import Workspace
from tests.e2e.test_node import open_job, owner_pid, start_node
from tests.helpers.jobs import audit_kinds, create_demo, record, replayed_state
from tests.helpers.mamcli import MAM, default_signals, mam

SHORT = ["--start-deadline", "30", "--heartbeat", "1"]


def user_turns(ws: Workspace, session: dict, needle: str) -> int:
    """How many messages the demo agent itself recorded receiving that hold `needle` (its own log)."""
    path = ws.state / "demo-agent" / "conversations" / f"{session['conversation_id']}.json"
    turns = json.loads(path.read_text())["turns"]
    return sum(1 for t in turns if t["role"] == "user" and needle in t["text"])


def spawn_delegate(*args: str, env: dict[str, str] | None = None) -> subprocess.Popen[str]:
    """`mam job delegate` with the signals it is sent at their defaults (a suite started in the
    background has SIGINT ignored, and an ignored signal stays ignored)."""
    import os

    return subprocess.Popen(
        [MAM, "job", "delegate", *args],
        env={**os.environ, **(env or {})},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        preexec_fn=default_signals,
    )


def interrupt(proc: subprocess.Popen[str], sig: int) -> tuple[str, str]:
    proc.send_signal(sig)
    try:
        return proc.communicate(timeout=30)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.communicate()
        raise


def line(job_id: str) -> str:
    return f"job {job_id} is still running; follow it with: mam job wait {job_id}"


def state(job_id: str) -> str:
    return str(json.loads(mam("job", "status", job_id, "--json", check=True).stdout)["state"])


@pytest.mark.parametrize("node", ["1", "0"], ids=["node", "no-node"])
def test_ctrl_c_leaves_the_job_open_and_wait_returns_its_real_outcome(wired, node, monkeypatch):
    monkeypatch.setenv("MAM_NODE", node)
    if node == "1":
        served_by = start_node(wired)
    s = create_demo("x")
    brief = "demo-sleep: 3\ndemo-write: out.txt :: finished after the interrupt"
    proc = spawn_delegate("--target", "x", "--brief", brief, "--json", *SHORT)
    try:
        job = open_job(wired)  # running: the brief was delivered and the agent started
        if node == "1":
            assert owner_pid(wired, job) == served_by  # the node drives the job
        else:
            assert owner_pid(wired, job) == proc.pid  # the wrapper is the command's own process
        out, err = interrupt(proc, signal.SIGINT)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 130, err
    assert line(job) in err.splitlines()
    assert out == ""
    assert state(job) not in ("completed", "failed", "timed_out", "cancelled")
    # As printed: it blocks until the job ends and exits with its code, with delegate's --json record.
    waited = mam("job", "wait", job, "--json", timeout=60)
    assert waited.returncode == 0, waited.stderr
    record = json.loads(waited.stdout)
    assert record["id"] == job and record["state"] == "completed" and record["exit_code"] == 0
    assert (wired.root / "out.txt").read_text() == "finished after the interrupt\n"
    assert user_turns(wired, s, job) == 1  # the brief was typed once
    assert replayed_state(wired, job).state.value == "completed"
    again = mam("job", "wait", job)  # an ended job: its outcome at once, delegate's plain output
    assert again.returncode == 0 and "write out.txt" in again.stdout


@pytest.mark.parametrize(("sig", "code"), [(signal.SIGTERM, 143), (signal.SIGHUP, 129)])
def test_sigterm_and_sighup_leave_the_job_open_with_the_line(wired, sig, code):
    create_demo("w", behaviour="silent_after_start")
    proc = spawn_delegate("--target", "w", "--brief", "hold", *SHORT, "--heartbeat", "60")
    try:
        job = open_job(wired)
        _out, err = interrupt(proc, sig)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == code, err
    assert line(job) in err.splitlines()
    assert state(job) == "running"
    mam("job", "cancel", job, check=True)


def test_the_next_job_is_not_held_and_the_interrupted_one_is_recorded_completed(wired):
    """The defect: Ctrl-C, the agent then finished the job, and the next delegation closed it as
    `timed_out`. The agent's stored `completed` decides it, and the next job goes after it."""
    s = create_demo("w")
    # A heartbeat the agent never needs to send (the deadline K x N is far): only its events end it.
    proc = spawn_delegate("--target", "w", "--brief", "demo-sleep: 3\ndemo-write: a.txt :: a", *SHORT)
    try:
        first = open_job(wired)
        _out, err = interrupt(proc, signal.SIGINT)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 130, err
    nxt = mam(
        "job", "delegate", "--target", "w", "--brief", "demo-write: b.txt :: b", "--json", *SHORT,
        "--dispatch-wait", "60", timeout=90,
    )  # fmt: skip
    assert nxt.returncode == 0, nxt.stderr
    assert json.loads(nxt.stdout)["state"] == "completed"
    status = json.loads(mam("job", "status", first, "--json", check=True).stdout)
    assert status["state"] == "completed" and status["reason"] == "completed" and status["exit_code"] == 0
    assert replayed_state(wired, first).state.value == "completed"
    assert (wired.root / "a.txt").read_text() == "a\n" and (wired.root / "b.txt").read_text() == "b\n"
    assert user_turns(wired, s, first) == 1


def test_detach_returns_once_delivered_and_wait_follows(wired):
    s = create_demo("w")
    brief = "demo-sleep: 2\ndemo-write: d.txt :: detached"
    done = mam("job", "delegate", "--target", "w", "--brief", brief, "--detach", "--json", *SHORT, timeout=60)
    assert done.returncode == 0, done.stderr
    got = json.loads(done.stdout)
    assert set(got) == {"id", "state"} and got["state"] in ("delivered", "running")
    job = got["id"]
    plain = mam("job", "wait", job, timeout=60)
    assert plain.returncode == 0, plain.stderr
    assert "write d.txt" in plain.stdout
    assert (wired.root / "d.txt").read_text() == "detached\n"
    assert user_turns(wired, s, job) == 1
    plain_id = mam("job", "delegate", "--target", "w", "--brief", "demo-sleep: 1", "--detach", *SHORT, timeout=60)
    assert plain_id.returncode == 0 and plain_id.stdout.strip().startswith("job-")
    assert mam("job", "wait", plain_id.stdout.strip(), timeout=60).returncode == 0


def test_wait_timeout_leaves_the_job_open(wired):
    create_demo("w", behaviour="silent_after_start")
    done = mam("job", "delegate", "--target", "w", "--brief", "hold", "--detach", "--json", *SHORT, "--heartbeat", "60")
    assert done.returncode == 0, done.stderr
    job = json.loads(done.stdout)["id"]
    waited = mam("job", "wait", job, "--timeout", "1", "--json", timeout=60)
    assert waited.returncode == 124, waited.stderr
    assert line(job) in waited.stderr.splitlines()
    assert json.loads(waited.stdout) == {"id": job, "state": "running"}
    assert state(job) == "running"
    mam("job", "cancel", job, check=True)
    ended = mam("job", "wait", job)
    assert ended.returncode == 5 and "cancelled" in ended.stderr


def test_wait_on_an_unknown_id_exits_2_and_writes_nothing(wired):
    before = sorted(str(p) for p in Path(wired.root).rglob("*"))
    proc = mam("job", "wait", "job-0123456789abcdef")
    assert proc.returncode == 2
    assert "no such job: job-0123456789abcdef" in proc.stderr
    assert sorted(str(p) for p in Path(wired.root).rglob("*")) == before
    bad = mam("job", "wait", "../etc")
    assert bad.returncode == 2 and bad.stdout == ""


def waiting_behind_a_silent_job(session: str, brief: str) -> tuple[str, subprocess.Popen[str], str]:
    """A job that starts and then says nothing holds `session`; a `mam job delegate` of `brief` (its
    process returned) waits behind it for its turn. Returns (the job ahead, that process, its job)."""
    ahead = mam(
        "job", "delegate", "--target", session, "--brief", "demo-behaviour: silent_after_start", *SHORT,
        "--heartbeat", "60", "--detach", timeout=60,
    )  # fmt: skip
    first = ahead.stdout.strip()
    assert ahead.returncode == 0 and first.startswith("job-"), ahead.stderr
    proc = spawn_delegate("--target", session, "--brief", brief, *SHORT, "--dispatch-wait", "120")

    def waiting() -> str:
        rows = json.loads(mam("job", "list", "--open", "--json", check=True).stdout)
        return next((r["id"] for r in rows if r["id"] != first and r["state"] == "pending"), "")

    try:
        second = wait_for(waiting, timeout=30, message="the second job never waited for its turn")
    except BaseException:
        proc.kill()
        proc.communicate()
        raise
    return first, proc, second


def test_interrupted_while_waiting_for_its_turn_it_keeps_its_place_and_is_typed_once(wired):
    """Nothing was typed yet: the client hands the job (and its brief) to a follower, prints the line, and
    the job is typed once, in its turn, after the job ahead of it."""
    s = create_demo("w")
    brief = "demo-write: second.txt :: typed once, in its turn"
    first, proc, second = waiting_behind_a_silent_job("w", brief)
    try:
        wait_for(
            lambda: any(line.get("kind") == "waiting" for line in audit_kinds(wired, second)),
            timeout=30,
            message="the second job never noted that it waits",
        )
        _out, err = interrupt(proc, signal.SIGINT)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 130, err
    assert line(second) in err.splitlines()
    assert state(second) == "pending" and user_turns(wired, s, second) == 0  # still waiting, nothing typed
    assert not list((wired.state / "run").glob("brief-*"))  # the brief's hand-over file is gone
    mam("job", "cancel", first, check=True)
    waited = mam("job", "wait", second, "--json", timeout=90)
    assert waited.returncode == 0, waited.stderr
    assert json.loads(waited.stdout)["state"] == "completed"
    assert (wired.root / "second.txt").read_text() == "typed once, in its turn\n"
    assert user_turns(wired, s, second) == 1


def test_taking_over_a_job_not_yet_typed_needs_its_own_brief_and_target(wired):
    """`--job-id` of a job still waiting for its turn: the one taking it over would type it, so it must
    bring the same brief and name the same session; otherwise exit 2 and nothing changes."""
    create_demo("w")
    create_demo("v")
    brief = "demo-write: taken.txt :: its own brief"
    first, proc, second = waiting_behind_a_silent_job("w", brief)
    try:
        owner = record(wired, second)["owner"]
        for args in (
            ("--target", "w", "--job-id", second),  # no brief: it would type the footer alone
            ("--target", "w", "--job-id", second, "--brief", "another text"),
            ("--target", "v", "--job-id", second, "--brief", brief),  # another session
        ):
            refused = mam("job", "delegate", *args, *SHORT, timeout=60)
            assert refused.returncode == 2 and "--job-id" in refused.stderr, (args, refused.stderr)
        assert record(wired, second)["owner"] == owner and state(second) == "pending"
        mam("job", "cancel", second, check=True)  # its own client then ends by itself (exit 5)
        _out, err = proc.communicate(timeout=60)
        assert proc.returncode == 5, err
    finally:
        mam("job", "cancel", first)
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
