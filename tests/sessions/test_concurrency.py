"""Many `mam session` processes at once in one workspace (Guarantee 5).

Real CLI processes, the demo agent in real panes of the test's private tmux server, and (for
the big run) a separate process parsing the YAML mirror the whole time.
"""

from __future__ import annotations

import json
import subprocess
import time
from typing import Any

from mam.workspace import Workspace
from tests.helpers.mamcli import mam, mam_json, spawn_mam
from tests.sessions.conftest import assert_mirror_matches_db, create_many, db_sessions, pane_ids

CREATES = 30
SAME_NAME = 5


def finish(procs: list[subprocess.Popen[str]], timeout: float) -> list[tuple[int, str, str]]:
    deadline = time.monotonic() + timeout
    results = []
    for proc in procs:
        out, err = proc.communicate(timeout=max(1.0, deadline - time.monotonic()))
        results.append((proc.returncode, out, err))
    return results


def test_thirty_concurrent_creates_get_thirty_panes_and_a_mirror_that_always_parses(
    workspace: Workspace, tmux_server: Any, mirror_reader: Any
) -> None:
    reader = mirror_reader(workspace)
    names = [f"agent-{i:02d}" for i in range(CREATES)]
    started = time.monotonic()
    procs = [
        spawn_mam("session", "create", "--agent", "demo", "--role", "dev", "--session", name, "--json")
        for name in names
    ]
    results = finish(procs, timeout=60)
    took = time.monotonic() - started
    seen = reader.stop()

    failed = [(name, rc, err) for name, (rc, _out, err) in zip(names, results) if rc != 0]
    assert not failed, f"{len(failed)} creates failed: {failed[:3]}"
    created = {json.loads(out)["name"]: json.loads(out) for _rc, out, _err in results}
    assert sorted(created) == names

    panes = pane_ids(tmux_server.name)
    assert len(panes) == CREATES and len(set(panes)) == CREATES
    assert sorted(row["pane_id"] for row in created.values()) == sorted(panes)

    status = mam_json("session", "status")
    assert sorted(r["name"] for r in status) == names
    assert {r["status"] for r in status} == {"running"}
    assert all(r["pane_alive"] and r["drift"] == "" for r in status), [r for r in status if r["drift"]]
    assert sorted(r["pane_id"] for r in status) == sorted(panes)

    assert seen["reads"] > 0, seen
    assert seen["failure_count"] == 0, seen["failures"]
    assert_mirror_matches_db(workspace)
    assert len(db_sessions(workspace)[1]) == CREATES
    print(
        f"{CREATES} creates in {took:.1f}s; mirror read {seen['reads']} times, {seen['generations_seen']} "
        "generations seen"
    )


def test_same_name_from_five_processes_exactly_one_wins(workspace: Workspace, tmux_server: Any) -> None:
    procs = [
        spawn_mam("session", "create", "--agent", "demo", "--role", "dev", "--session", "same", "--json")
        for _ in range(SAME_NAME)
    ]
    results = finish(procs, timeout=60)

    winners = [out for rc, out, _err in results if rc == 0]
    losers = [(rc, err) for rc, _out, err in results if rc != 0]
    assert len(winners) == 1, results
    assert len(losers) == SAME_NAME - 1
    for rc, err in losers:
        assert rc == 5 and "session 'same' already exists" in err, (rc, err)

    row = json.loads(winners[0])
    assert pane_ids(tmux_server.name) == [row["pane_id"]]  # the losers started nothing
    status = mam_json("session", "status")
    assert [(r["name"], r["status"], r["pane_id"]) for r in status] == [("same", "running", row["pane_id"])]
    assert_mirror_matches_db(workspace)


def test_concurrent_resumes_of_one_stopped_session_launch_one_agent(workspace: Workspace, tmux_server: Any) -> None:
    create_many(["twin"])
    mam("session", "stop", "--session", "twin", check=True)
    assert pane_ids(tmux_server.name) == []

    procs = [spawn_mam("session", "resume", "--session", "twin", "--json") for _ in range(SAME_NAME)]
    results = finish(procs, timeout=60)

    winners = [json.loads(out) for rc, out, _err in results if rc == 0]
    assert len(winners) == 1, results
    for rc, _out, err in results:
        if rc != 0:  # refused at the claim whichever way the race went, or after the winner's resume ended
            assert (
                rc == 1
                and "session 'twin'" in err
                and any(w in err for w in ("is being started by another command", "changed while", "already running"))
            ), err
    assert pane_ids(tmux_server.name) == [winners[0]["pane_id"]]  # one agent on the conversation, not five
    status = mam_json("session", "status")
    assert [(r["name"], r["status"], r["pane_id"], r["drift"]) for r in status] == [
        ("twin", "running", winners[0]["pane_id"], "")
    ]
