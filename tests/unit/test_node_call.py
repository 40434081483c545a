"""An operation of the node protocol for a library caller (mam/node/call.py): typed values in, typed values out.
When no node may run it, it runs in the caller's process (mam/node/local.py), writes nothing to the process's own
streams (the MCP server's stdout is its protocol stream) and starts no node."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from mam.errors import Refused
from mam.node.call import Delivered, answer, delegation
from mam.node.service import Reply, Service, snapshot

REPO = Path(__file__).resolve().parents[2]
SCRIPT = """
import json, os, sys
from mam.node.call import call

root, setting = sys.argv[1], sys.argv[2]
env = {**os.environ, setting: sys.argv[3]}
final = call(root, "wait", {"job": "job-0123456789abcdef"}, environ=env)
print(json.dumps(final))
print("the process's own stdout still works", file=sys.stdout)
"""


@pytest.mark.parametrize(("setting", "value"), [("MAM_NODE", "0"), ("MAM_NO_AUTOSTART", "1")])
def test_an_operation_no_node_may_run_runs_here_and_answers_as_data(tmp_path, setting, value):
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
    final = json.loads(first)
    assert final["exit"] == 2 and final["here"] is True
    assert final["error"].startswith("no such job: job-0123456789abcdef")
    assert second == "the process's own stdout still works"
    assert done.stderr == ""  # nothing the operation said reached the process's own streams
    assert not (root / ".mam" / "run" / "node.sock").exists()  # and no node was started for it


def test_an_answer_is_its_value_and_an_error_is_refused_with_the_nodes_line_and_code():
    assert answer({"answer": {"id": "job-1"}, "exit": 0}) == {"id": "job-1"}
    with pytest.raises(Refused) as e:
        answer({"error": "no session named 'w' in this workspace", "exit": 5, "kind": "SessionNotFound"})
    assert str(e.value) == "no session named 'w' in this workspace" and e.value.exit_code == 5
    assert e.value.kind == "SessionNotFound"
    with pytest.raises(Refused) as e:
        answer({"lost": "the node ended before it answered; see .mam/run/node.log", "exit": 1})
    assert e.value.exit_code == 1


def test_a_delegation_answers_its_outcome_or_delivered(monkeypatch):
    import mam.node.call as call_module

    record = {"id": "job-1", "state": "completed", "reason": "", "exit_code": 0, "result": "done", "report": "r"}
    told: list[str] = []

    def fake(_root, op, args, *, on_frame=None, **_kw):
        assert op == "delegate" and args["target"] == "w"
        on_frame({"job": "job-1"})
        return {"answer": record if not args.get("detach") else {"id": "job-1", "state": "running"}, "exit": 0}

    monkeypatch.setattr(call_module, "call", fake)
    got = delegation(None, {"target": "w", "brief": "x"}, on_job=told.append)
    assert (got.job_id, got.state, got.exit_code, got.result, got.report) == ("job-1", "completed", 0, "done", "r")
    assert told == ["job-1"]
    assert delegation(None, {"target": "w", "brief": "x", "detach": True}) == Delivered("job-1", "running")


def test_an_internal_error_is_one_line_naming_the_job_and_the_node_keeps_serving(tmp_path, monkeypatch):
    from mam.settings import load_settings
    from mam.workspace import Workspace

    ws = Workspace(tmp_path)
    ws.ensure_state()
    service = Service(ws, load_settings(env_file=None, environ={}), daemon=False)

    def broken(*_a, **_k):
        raise RuntimeError("a bug")

    monkeypatch.setattr(service, "op_cancel", broken)
    final, then = service.serve("cancel", {"job": "job-9"}, {}, Reply(lambda _m: None))
    assert final == {"error": "the node failed to cancel (job job-9): see .mam/run/node.log", "exit": 1}
    assert then is None
    final, _ = service.serve("wait", {"job": "job-9"}, {}, Reply(lambda _m: None))
    assert final["exit"] == 2 and "no such job" in final["error"]  # the next operation is served as usual


def test_a_progress_frame_carries_what_the_live_line_shows():
    from mam.jobs.model import Event, Job

    job = Job("job-1", "w", "n", 0, 1000, 1000, 4, 60000)
    body = snapshot(job, Event(at=5, type="progress", sender="agent", seq=1, body={"message": "half"}))
    assert body["input"] == "event progress" and body["type"] == "progress" and body["message"] == "half"
    assert body["job"]["id"] == "job-1" and body["job"]["budget_ms"] == 60000
    json.dumps(body)  # a frame is JSON


def test_the_service_runs_every_operation_the_node_does_not_answer_itself(tmp_path):
    from mam.protocol import CONTROL, OPS
    from mam.settings import load_settings
    from mam.workspace import Workspace

    service = Service(Workspace(tmp_path), load_settings(env_file=None, environ={}), daemon=False)
    assert set(service.handlers()) == set(OPS) - CONTROL
