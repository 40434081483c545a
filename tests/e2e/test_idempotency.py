"""Idempotency keys and single-flight (issue 17, part 3): real tmux, the demo agent, a real Mosquitto.

One broker only (the key is decided in the registry, not on the wire): the tests stay lean.
"""

from __future__ import annotations

import json
import time

import pytest

from mam.jobs.attach import dedup_key
from mam.jobs.record import read_audit
from mam.util.poll import wait_for
from mam.workspace import Workspace
from tests.helpers.jobs import capture, create_demo
from tests.helpers.mamcli import mam, spawn_mam

SHORT = ["--start-deadline", "30", "--heartbeat", "2"]


def user_turns(ws: Workspace, session: dict, needle: str) -> int:
    """How many messages the demo agent itself recorded receiving that hold `needle` (its own log)."""
    path = ws.state / "demo-agent" / "conversations" / f"{session['conversation_id']}.json"
    turns = json.loads(path.read_text())["turns"]
    return sum(1 for t in turns if t["role"] == "user" and needle in t["text"])


def jobs(ws: Workspace) -> list[dict]:
    return json.loads(mam("job", "list", "--json", check=True).stdout)


def attached_rows(ws: Workspace, job_id: str) -> int:
    return sum(1 for line in read_audit(ws, job_id) if line["kind"] == "attached")


def test_twenty_concurrent_delegates_with_one_key_make_one_job_one_injection_twenty_equal_results(wired, tmux_server):
    s = create_demo("w")
    argv = ["job", "delegate", "--target", "w", "--idempotency-key", "build-42", *SHORT]
    brief = "demo-sleep: 1\ndemo-write: once.txt :: written once"
    procs = [spawn_mam(*argv, "--brief", brief) for _ in range(20)]
    outs = [(p.wait(timeout=120), *p.communicate()) for p in procs]
    made = jobs(wired)
    assert len(made) == 1, made
    job = made[0]
    assert {rc for rc, _o, _e in outs} == {0}, outs
    assert len({out for _rc, out, _e in outs}) == 1 and outs[0][1].strip(), outs  # the same result, 20 times
    assert sum(f"attached to job {job['id']}" in err for _rc, _o, err in outs) == 19
    assert attached_rows(wired, job["id"]) == 19
    assert user_turns(wired, s, job["id"]) == 1  # the agent received the brief once
    assert capture(tmux_server.name, s["pane_id"]).count(job["nonce"]) == 1
    assert (wired.root / "once.txt").read_text() == "written once\n"
    status = json.loads(mam("job", "status", job["id"], "--json", check=True).stdout)
    assert status["idempotency_key"] == "build-42" and status["state"] == "completed"


def test_dedup_collapses_the_same_brief_to_the_same_session_only(wired, tmux_server):
    s = create_demo("w")
    create_demo("v")
    first = json.loads(mam("job", "delegate", "--json", "--dedup", "--target", "w", "--brief", "same", *SHORT).stdout)
    again = mam("job", "delegate", "--json", "--dedup", "--target", "tmux:w", "--brief", "same", *SHORT)
    assert again.returncode == 0 and json.loads(again.stdout)["id"] == first["id"]
    assert json.loads(again.stdout)["attached"] is True and first["attached"] is False
    assert first["idempotency_key"] == dedup_key("w", "same")
    other = json.loads(mam("job", "delegate", "--json", "--dedup", "--target", "w", "--brief", "else", *SHORT).stdout)
    elsewhere = json.loads(mam("job", "delegate", "--json", "--dedup", "--target", "v", "--brief", "same").stdout)
    assert len({first["id"], other["id"], elsewhere["id"]}) == 3
    assert user_turns(wired, s, first["id"]) == 1


def test_attach_to_an_ended_job_exits_with_its_code_and_an_expired_key_makes_a_new_job(wired):
    s = create_demo("w", behaviour="error")
    argv = ["job", "delegate", "--json", "--target", "w", "--idempotency-key", "k1", "--brief", "fail", *SHORT]
    first = mam(*argv)
    assert first.returncode == 1, first.stderr
    rec = json.loads(first.stdout)
    again = mam(*argv)
    assert again.returncode == 1 and json.loads(again.stdout)["id"] == rec["id"]
    assert json.loads(again.stdout)["reason"] == "agent_error"
    assert user_turns(wired, s, rec["id"]) == 1 and attached_rows(wired, rec["id"]) == 1
    created = json.loads(mam("job", "status", rec["id"], "--json", check=True).stdout)["created_at"]
    # The claimant's TTL decides: with 0.5 s the key, claimed more than that ago, names nothing now.
    wait_for(lambda: time.time() > created + 0.6, timeout=10, message="the key's TTL did not pass")
    late = mam(*argv, env={"MAM_IDEMPOTENCY_TTL_S": "0.5"})
    assert late.returncode == 1 and json.loads(late.stdout)["id"] != rec["id"]
    assert len(jobs(wired)) == 2


@pytest.mark.parametrize(
    "flags, said",
    [
        (["--idempotency-key", "bad key"], "invalid idempotency key"),
        (["--idempotency-key", "x" * 129], "invalid idempotency key"),
        (["--idempotency-key", "-k"], "invalid idempotency key"),
        (["--idempotency-key", "k", "--dedup"], "at most one of --idempotency-key and --dedup"),
    ],
)
def test_a_bad_key_is_refused_before_anything_is_written(workspace, flags, said):
    proc = mam("job", "delegate", "--target", "w", "--brief", "b", *flags)
    assert proc.returncode == 2 and said in proc.stderr, proc.stderr
    assert not workspace.state.exists()


def test_a_key_never_attaches_to_another_sessions_job_or_another_brief(wired, tmp_path):
    """Issue 25, item 3: a reused key with another target and brief returned the first job's result, exit 0."""
    w = create_demo("w")
    v = create_demo("v")
    first = json.loads(
        mam("job", "delegate", "--json", "--target", "w", "--idempotency-key", "K", "--brief", "one").stdout
    )
    assert first["state"] == "completed" and first["session"] == "w", first
    for target, brief, why in (("v", "two", "brief differs"), ("v", "one", "target"), ("w", "two", "brief differs")):
        before = sorted(p.name for p in (wired.root / ".mam" / "jobs").iterdir())
        other = mam("job", "delegate", "--target", target, "--idempotency-key", "K", "--brief", brief, *SHORT)
        assert other.returncode == 2, (other.stdout, other.stderr)
        assert other.stdout == "" and len(other.stderr.strip().splitlines()) == 1, other.stderr
        assert first["id"] in other.stderr and "session 'w'" in other.stderr and why in other.stderr, other.stderr
        assert sorted(p.name for p in (wired.root / ".mam" / "jobs").iterdir()) == before
    assert [j["id"] for j in jobs(wired)] == [first["id"]]
    assert attached_rows(wired, first["id"]) == 0
    assert user_turns(wired, v, "mam job") == 0  # the other session never got a brief
    same = json.loads(
        mam("job", "delegate", "--json", "--target", "w", "--idempotency-key", "K", "--brief", "one").stdout
    )
    assert (same["attached"], same["id"], same["session"]) == (True, first["id"], "w"), same
    assert user_turns(wired, w, first["id"]) == 1
