"""A loop hands its jobs to the workspace's node (mam/loop/jobs.py: `mam job delegate --json` through
mam.node.call), as the CLI does: the creator's job is owned by the node while it runs and shows among its open
jobs, and the reviewers' jobs (parallel node requests) are the node's too, each recorded with its kind. With
MAM_NODE=0 the same commands run in the loop's own process and the loop still passes."""

from __future__ import annotations

import json

import pytest

from tests.e2e.test_node import node_pid, owner_pid
from tests.helpers.jobs import create_demo
from tests.helpers.mamcli import mam, spawn_mam
from tests.loop.helpers import FAST_JOB
from tests.loop.test_loop_concurrency import finish, running_job

# The creator's turn goes on until the test lets it (demo-await), however slow the machine: with a fixed
# `demo-sleep: 3` a loaded CI machine ended the job between two of the test's looks, which never saw it run.
TASK = "demo-await: {go}\ndemo-write: feature.txt :: the feature\ndemo-commit: add the feature"


def _jobs() -> list[dict[str, object]]:
    rows = json.loads(mam("job", "list", "--json", check=True).stdout)
    return [j for j in rows if str(j["kind"]).startswith("loop-")]


@pytest.mark.parametrize("node", [True, False], ids=["node", "no-node"])
def test_a_loops_jobs_run_in_the_node_or_with_mam_node_0_in_the_loop(loop_ws, poll, node):
    create_demo("creator")
    create_demo("rev-a", role="reviewer")
    create_demo("rev-b", role="reviewer")
    env = None if node else {"MAM_NODE": "0"}
    go = loop_ws.root / "go"
    task = TASK.format(go=go)
    args = ("loop", "--json", *FAST_JOB, "--creator", "creator", "--reviewer", "rev-a,rev-b", "--task", task)
    loop = spawn_mam(*args, env=env)
    try:
        creating = poll(lambda: running_job("creator"), timeout=120, message="the creator's job never started")
        owner = owner_pid(loop_ws, creating)  # while it runs
        if node:
            assert owner == node_pid(loop_ws) != loop.pid
            status = json.loads(mam("node", "status", "--json", check=True).stdout)
            assert creating in status["open_jobs"]
        else:
            assert owner == loop.pid and node_pid(loop_ws) == 0
        go.touch()
        code, out, err = finish(loop)
    finally:
        go.touch()
        if loop.poll() is None:
            loop.kill()
            loop.communicate()
    assert code == 0, err
    assert json.loads(out)["state"] == "passed"
    jobs = _jobs()
    assert sorted(str(j["kind"]) for j in jobs) == ["loop-create", "loop-review", "loop-review"]
    assert {owner_pid(loop_ws, str(j["id"])) for j in jobs} == {owner}
    assert all(j["state"] == "completed" for j in jobs)
