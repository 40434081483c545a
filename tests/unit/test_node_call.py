"""A command the node serves, run for a library caller with streams of its own (mam/node/call.py), and its answer
read back (mam/jobs/command.py): when no node may run it, it runs in the caller's process and writes only to the
caller's files, never to the process's own stdout (the MCP server's protocol stream)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from mam.errors import DelegationFailed
from mam.jobs.command import Answer, Delivered, read
from mam.jobs.result import Outcome

REPO = Path(__file__).resolve().parents[2]
SCRIPT = """
import json, os, sys
from mam.node import call

root, setting = sys.argv[1], sys.argv[2]
env = {**os.environ, setting: sys.argv[3]}
answer = call.run(root, ["job", "wait", "job-0123456789abcdef", "--json"], environ=env)
print(json.dumps({"code": answer.code, "stdout": answer.stdout, "stderr": answer.stderr}))
print("the process's own stdout still works", file=sys.stdout)
"""


@pytest.mark.parametrize(("setting", "value"), [("MAM_NODE", "0"), ("MAM_NO_AUTOSTART", "1")])
def test_a_command_no_node_may_run_runs_here_on_the_callers_own_streams(tmp_path, setting, value):
    root = tmp_path / "ws"
    (root / ".mam").mkdir(parents=True, mode=0o700)
    env = {k: v for k, v in os.environ.items() if not k.startswith("MAM_")}
    done = subprocess.run(
        [sys.executable, "-c", SCRIPT, str(root), setting, value],
        capture_output=True,
        text=True,
        timeout=60,
        env={**env, "PYTHONPATH": str(REPO)},
        cwd=tmp_path,
    )
    assert done.returncode == 0, done.stderr
    first, second = done.stdout.splitlines()
    answer = json.loads(first)
    assert answer["code"] == 2 and answer["stdout"] == ""
    assert answer["stderr"].startswith("mam: error: no such job: job-0123456789abcdef")
    assert second == "the process's own stdout still works"
    assert "no such job" not in done.stderr  # nothing the command printed reached the process's own streams
    assert not (root / ".mam" / "run" / "node.sock").exists()  # and no node was started for it


def test_the_record_a_delegation_printed_is_its_outcome():
    record = {"id": "job-1", "state": "completed", "reason": "", "exit_code": 0, "result": "done", "report": "r"}
    got = read(Answer(0, json.dumps(record, indent=2) + "\n", "job-1\n"))
    assert isinstance(got, Outcome)
    assert (got.job_id, got.state, got.exit_code, got.result, got.report) == ("job-1", "completed", 0, "done", "r")
    assert got.as_dict()["result"] == "done"


def test_a_detached_answer_is_delivered_and_the_last_record_counts():
    again = json.dumps({"id": "job-1", "state": "running"})  # the command run again after a node died
    got = read(Answer(0, json.dumps({"id": "job-1", "state": "pending"}) + "\n" + again, ""))
    assert got == Delivered("job-1", "running")


def test_no_record_is_the_commands_error_line_and_exit_code():
    with pytest.raises(DelegationFailed) as e:
        read(Answer(5, "", "mam: warning: x\nmam: error: no session named 'w' in this workspace\n"))
    assert str(e.value) == "no session named 'w' in this workspace" and e.value.exit_code == 5
    with pytest.raises(DelegationFailed) as e:
        read(Answer(1, "", ""))
    assert e.value.exit_code == 1 and "printed no record" in str(e.value)
