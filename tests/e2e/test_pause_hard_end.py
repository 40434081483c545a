"""A job ended while hard paused (mam/jobs/pause.py, mam/jobs/delivery.py `relaunch_after_pause`), end to end: real
tmux, the demo agent, a real broker and the node. A hard pause stops the agent as `mam session stop` does; the job
is then cancelled while paused, so nobody resumes it. The session's next delegation (one waiting behind the paused
job, or one made after it ended and the node was killed -9) relaunches the agent with its conversation first, then
types its brief: `completed` exit 0, the brief typed once, into the same conversation."""

from __future__ import annotations

import json
import os
import signal
import subprocess

import pytest

from mam.util.poll import wait_for
from tests.e2e.test_interrupt import spawn_delegate, state, user_turns
from tests.e2e.test_node import node_pid, open_job
from tests.e2e.test_pause import SHORT, finish, session_row
from tests.helpers.jobs import audit_kinds, create_demo
from tests.helpers.mamcli import mam


@pytest.mark.parametrize("when", ["waiting behind it", "after a node restart"])
def test_the_next_delegation_after_a_job_ended_hard_paused_relaunches_the_agent(wired, when):
    s = create_demo("a3")
    first = spawn_delegate("--target", "a3", "--brief", "demo-sleep: 30", "--json", *SHORT)
    second: subprocess.Popen[str] | None = None
    brief = "demo-write: after.txt :: after the hard pause"
    try:
        job = open_job(wired)  # running: delivered and started
        mam("job", "pause", job, "--mode", "hard", "--by", "tester", check=True)
        row = session_row("a3")
        assert row["status"] == "stopped" and row["conversation_id"] == s["conversation_id"]
        assert job in row["note"]  # stopped by this job's hard pause
        if when == "waiting behind it":
            second = spawn_delegate("--target", "a3", "--brief", brief, "--json", *SHORT)
            waiting = open_job(wired, "pending")  # the stopped session is its target still: it waits its turn
            assert waiting != job
        mam("job", "cancel", job, check=True)  # ended while paused: nobody resumes it
        _out, err = finish(first)
        assert first.returncode == 5, err
        assert state(job) == "cancelled"
        if when == "after a node restart":
            assert session_row("a3")["status"] == "stopped"  # the end relaunches nothing by itself
            # The node that ran the job is killed; with no job open and the tmux server gone (the hard pause
            # stopped the only pane) it may have ended by itself already, as an idle node does (a loaded machine
            # makes the test's steps outlast its next look): either way the next delegation starts a new one.
            pid = node_pid(wired)
            if pid:
                os.kill(pid, signal.SIGKILL)
            wait_for(lambda: not node_pid(wired), timeout=30, message="the node did not die")
            second = spawn_delegate("--target", "a3", "--brief", brief, "--json", *SHORT)
        assert second is not None
        out, err = finish(second)
    finally:
        for proc in (first, second):
            if proc is not None and proc.poll() is None:
                proc.kill()
                proc.communicate()
    assert second.returncode == 0, err
    record = json.loads(out)
    assert record["state"] == "completed" and record["exit_code"] == 0
    assert (wired.root / "after.txt").read_text() == "after the hard pause\n"
    assert user_turns(wired, s, "demo-write: after.txt") == 1  # typed once, into the same conversation
    row = session_row("a3")
    assert row["status"] == "running" and row["conversation_id"] == s["conversation_id"]
    relaunched = [line for line in audit_kinds(wired, record["id"]) if line.get("kind") == "agent_relaunched"]
    assert len(relaunched) == 1 and relaunched[0]["paused_job"] == job, relaunched
