"""`mam mcp` over stdio, driven by the SDK's own client: real tmux, demo agents, a real Mosquitto."""

from __future__ import annotations

import json
from typing import Any

import anyio
import pytest

from mam.jobs.record import read_audit
from mam.util.poll import wait_for
from tests.e2e.test_node import node_pid, owner_pid
from tests.helpers.jobs import capture, create_demo
from tests.helpers.mamcli import mam
from tests.mcp.client import call, job_state, stdio_session

TOOLS = {
    "session_create",
    "session_stop",
    "session_remove",
    "session_resume",
    "session_status",
    "session_fork",
    "job_delegate",
    "job_wait",
    "job_status",
    "job_list",
    "job_log",
    "job_cancel",
    "job_pause",
    "job_resume",
    "pause_all",
    "resume_all",
    "job_send",
    "loop_start",
    "loop_status",
    "loop_approve",
    "loop_reject",
    "events_recent",
    "budget_status",
    "board_read",
    "board_write",
    "board_list",
    "job_fanout",
    "routine_add",
    "routine_list",
    "routine_log",
    "routine_run",
    "task_add",
    "task_list",
    "task_show",
    "task_done",
}
QUICK = {"heartbeat_s": 2, "start_deadline_s": 30}  # K x N = 8 s of silence allowed: a loaded machine delays heartbeats


def test_tools_are_listed_and_looking_starts_nothing(workspace, tmux_server):
    """No broker is configured: looking must not start the embedded one, a tmux server, or even create .mam/."""

    async def main() -> None:
        async with stdio_session(workspace.root) as s:
            tools = (await s.list_tools()).tools
            assert {t.name for t in tools} == TOOLS
            delegate = next(t for t in tools if t.name == "job_delegate")
            assert {
                "target",
                "brief",
                "timeout_s",
                "start_deadline_s",
                "heartbeat_s",
                "parent_job",
                "job_id",
                "wait",
            } <= set(delegate.input_schema["properties"])
            status = await call(s, "session_status")
            assert not status.error and status.data == {"sessions": []} and status.text == "no sessions"
            assert (await call(s, "job_list")).data == {"jobs": []}
            assert (await call(s, "events_recent")).data == {"events": []}
            budget = (await call(s, "budget_status")).data
            assert budget["running"] == budget["queued"] == budget["tokens_saved_by_dedup"] == 0
            missing = await call(s, "job_status", id="job-0123456789abcdef")
            assert missing.error and missing.data["exit_code"] == 5 and "no job 'job-0123456789abcdef'" in missing.text
            loop = await call(s, "loop_status", id="loop-nope")
            assert loop.error and loop.data["exit_code"] == 5

    anyio.run(main)
    assert not workspace.state.exists()
    assert not tmux_server.running()


def test_create_delegate_returns_before_the_end_and_wait_sees_it_complete(mcp_ws, tmux_server):
    async def main() -> None:
        async with stdio_session(mcp_ws.root) as s:
            made = await call(s, "session_create", agent="demo", role="dev", name="w")
            assert not made.error, made.text
            assert made.data["name"] == "w" and made.data["status"] == "running" and made.data["pane_id"]
            brief = "demo-sleep: 2\ndemo-write: out.txt :: via mcp"
            sent = await call(s, "job_delegate", target="tmux:w", brief=brief, **QUICK)
            assert not sent.error, sent.text
            job_id = sent.data["id"]
            # Returned once the brief was in the pane, while the job still runs.
            assert sent.data["state"] in ("delivered", "running") and sent.data["session"] == "w"
            assert job_state(job_id) in ("delivered", "running")
            assert "token" not in sent.data
            done = await call(s, "job_wait", progress=True, id=job_id, timeout_s=60)
            assert not done.error, done.text
            assert done.data["state"] == "completed" and done.data["exit_code"] == 0 and done.data["ended"] is True
            kinds = [p.split(" ")[0].rstrip(":") for p in done.progress]
            assert kinds[0] == "started" and "progress" in kinds and kinds[-1] == "completed", done.progress
            status = await call(s, "job_status", id=job_id)
            assert status.data["state"] == "completed" and status.data["children"] == []
            events = await call(s, "events_recent", job=job_id)
            assert [e["type"] for e in events.data["events"]][0] == "started"
            log = await call(s, "job_log", id=job_id, limit=3)
            assert len(log.data["lines"]) == 3
            return made.data["pane_id"], sent.data["nonce"]

    pane, nonce = anyio.run(main)
    assert (mcp_ws.root / "out.txt").read_text() == "via mcp\n"
    assert capture(tmux_server.name, pane).count(nonce) == 1  # injected once


def test_busy_session_is_an_error_with_exit_code_5_and_its_brief_never_reaches_the_pane(mcp_ws, tmux_server):
    s_row = create_demo("w")

    async def main() -> None:
        async with stdio_session(mcp_ws.root) as s:
            first = await call(s, "job_delegate", target="w", brief="demo-sleep: 30", **QUICK)
            assert not first.error and first.data["state"] in ("delivered", "running"), first.text
            second = await call(
                s, "job_delegate", target="w", brief="SECOND-BRIEF-MARKER", dispatch_wait_s=0.5, **QUICK
            )
            assert second.error
            assert (
                second.data["exit_code"] == 5
                and second.data["reason"] == "session_busy"
                and second.data["state"] == "cancelled"
            )
            assert "session_busy" in second.text
            cancelled = await call(s, "job_cancel", id=first.data["id"])
            assert not cancelled.error and cancelled.data["state"] == "cancelled" and cancelled.data["exit_code"] == 5
            again = await call(s, "job_cancel", id=first.data["id"])
            assert again.error and again.data["exit_code"] == 1 and "already ended" in again.text
            return second.data["id"]

    second_id = anyio.run(main)
    assert "SECOND-BRIEF-MARKER" not in capture(tmux_server.name, s_row["pane_id"])
    kinds = {line["kind"] for line in read_audit(mcp_ws, second_id)}
    inputs = [line["input"]["input"] for line in read_audit(mcp_ws, second_id) if line["kind"] == "input"]
    assert "claim" not in inputs and "delivered" not in inputs, kinds


def test_bad_input_and_unknown_names_are_tool_errors_with_the_cli_exit_codes(mcp_ws):
    async def main() -> None:
        async with stdio_session(mcp_ws.root) as s:
            cases = [
                ("job_delegate", {"target": "tmux:../etc", "brief": "x"}, 2, "invalid session name"),
                ("job_delegate", {"target": "w", "brief": "   "}, 2, "brief"),
                ("job_delegate", {"target": "w", "brief": "x", "job_id": "a b"}, 2, "invalid job id"),
                ("job_delegate", {"target": "nobody", "brief": "x", **QUICK}, 5, "nobody"),
                ("session_stop", {"name": "nobody"}, 5, "nobody"),
                ("session_remove", {"name": "nobody"}, 5, "nobody"),
                ("loop_approve", {"id": "loop-nope"}, 5, "no loop"),
                ("loop_reject", {"id": "loop-nope", "note": "x"}, 5, "no loop"),
                ("session_status", {"name": "nobody"}, 5, "nobody"),
                ("session_create", {"agent": "nope", "role": "dev", "name": "x"}, 2, "unknown agent"),
                ("job_log", {"id": "../../etc/passwd"}, 2, "invalid job id"),
                ("loop_start", {"creator": "nobody", "task": "t"}, 5, "nobody"),
                ("loop_start", {"creator": "a;b", "task": "t"}, 2, "invalid creator"),
            ]
            for tool, args, code, words in cases:
                r = await call(s, tool, **args)
                assert r.error, (tool, args, r)
                assert r.data["exit_code"] == code and words in r.text, (tool, args, r)
            # The server is still there after every refusal.
            assert not (await call(s, "session_status")).error

    anyio.run(main)


@pytest.mark.slow  # about 12-25 s: started among the first, not last (tests/conftest.py)
def test_a_wait_held_open_does_not_keep_session_status_from_being_answered(mcp_ws):
    create_demo("w")

    async def main() -> None:
        async with stdio_session(mcp_ws.root) as s:
            sent = await call(s, "job_delegate", target="w", brief="demo-sleep: 60", **QUICK)
            assert not sent.error, sent.text
            waited: dict[str, object] = {}

            async def hold() -> None:
                waited["result"] = await call(s, "job_wait", id=sent.data["id"], timeout_s=10)

            async with anyio.create_task_group() as tg:
                tg.start_soon(hold)
                await anyio.sleep(0)
                status = await call(s, "session_status", name="w")
                events = await call(s, "events_recent", session="w")
                # Answered while the wait is still open.
                assert "result" not in waited
                assert not status.error and status.data["sessions"][0]["name"] == "w"
                assert not events.error
            result = waited["result"]
            assert not result.error and result.data["ended"] is False and result.data["state"] == "running"
            assert "still open" in result.text
            await call(s, "job_cancel", id=sent.data["id"])

    anyio.run(main)


@pytest.mark.parametrize("node", [True, False], ids=["node", "no-node"])
def test_a_client_that_goes_away_leaves_its_job_running_to_the_end(mcp_ws, node):
    """The stdio server exits with its client: the job runs on in the node that owns it (with no node, the
    server drove it and hands it over), never lost or ended."""
    create_demo("w")

    async def main() -> str:
        async with stdio_session(mcp_ws.root, None if node else {"MAM_NODE": "0"}) as s:
            sent = await call(
                s, "job_delegate", target="w", brief="demo-sleep: 3\ndemo-write: after.txt :: still done", **QUICK
            )
            assert not sent.error, sent.text
            with anyio.move_on_after(0.5):
                await call(s, "job_wait", id=sent.data["id"], timeout_s=30)  # given up mid-wait
            return sent.data["id"]

    job_id = anyio.run(main)
    wait_for(
        lambda: job_state(job_id) == "completed", timeout=60, message="the job did not complete after its client left"
    )
    assert (mcp_ws.root / "after.txt").read_text() == "still done\n"
    if node:
        assert owner_pid(mcp_ws, job_id) == node_pid(mcp_ws)  # the node drove it to its end
    else:
        assert node_pid(mcp_ws) == 0
        assert "taken_over" in [line["kind"] for line in read_audit(mcp_ws, job_id)]  # by the server's follower


def test_a_job_still_waiting_for_its_turn_is_handed_over_with_its_brief_and_typed_once(mcp_ws):
    """The server ends while its job waits behind another: the follower gets the brief too (a 0600 file
    it deletes), so the job is typed once, in its turn, with its own text, never as an empty brief."""
    s = create_demo("w")
    go = mcp_ws.root / "go"  # the job ahead runs until the test has seen this one wait (however slow the machine)
    ahead = mam(
        "job", "delegate", "--target", "w", "--brief", f"demo-await: {go}", "--heartbeat", "2",
        "--start-deadline", "30", "--detach", timeout=60,
    )  # fmt: skip
    assert ahead.returncode == 0, ahead.stderr
    brief = "demo-write: queued.txt :: handed over with its brief"

    job_id = "job-mcp-handover-1"

    def pending() -> bool:
        shown = mam("job", "status", job_id, "--json")
        return shown.returncode == 0 and json.loads(shown.stdout)["state"] == "pending"

    async def main() -> None:
        async with stdio_session(mcp_ws.root) as sess, anyio.create_task_group() as tg:
            # job_delegate returns once the brief is delivered: the client leaves before that.
            tg.start_soon(lambda: call(sess, "job_delegate", target="w", brief=brief, job_id=job_id, **QUICK))
            await anyio.to_thread.run_sync(
                lambda: wait_for(pending, timeout=30, message="the job never waited for its turn")
            )
            tg.cancel_scope.cancel()
        go.touch()

    anyio.run(main)  # the client leaves: the server hands its job over
    waited = mam("job", "wait", job_id, "--json", timeout=90)
    assert waited.returncode == 0, waited.stderr
    assert (mcp_ws.root / "queued.txt").read_text() == "handed over with its brief\n"
    path = mcp_ws.state / "demo-agent" / "conversations" / f"{s['conversation_id']}.json"
    turns = [t["text"] for t in json.loads(path.read_text())["turns"] if t["role"] == "user"]
    assert sum(brief in t for t in turns) == 1 and sum(job_id in t for t in turns) == 1, turns
    assert not list((mcp_ws.state / "run").glob("brief-*"))


def test_broker_down_is_a_tool_error_with_exit_code_3(workspace, monkeypatch):
    from mam.broker.embedded import free_port

    monkeypatch.setenv("MQTT_BROKER", "127.0.0.1")
    monkeypatch.setenv("MQTT_PORT", str(free_port()))  # nothing listens there
    create_demo("w")

    async def main() -> None:
        async with stdio_session(workspace.root) as s:
            r = await call(s, "job_delegate", target="w", brief="never delivered", **QUICK)
            assert r.error and r.data["exit_code"] == 3 and r.data["reason"] == "broker_unavailable", r
            assert not (await call(s, "session_status")).error  # the server goes on

    anyio.run(main)


def test_session_fork_starts_a_copy_of_the_conversation_and_refuses_an_unknown_source(mcp_ws, tmux_server):
    src = create_demo("src")

    async def main() -> None:
        async with stdio_session(mcp_ws.root) as s:
            missing = await call(s, "session_fork", source="nope", name="f")
            assert missing.error and missing.data["exit_code"] == 5, missing.text
            made = await call(s, "session_fork", source="src", name="f", role="reviewer", by="mcp-test")
            assert not made.error, made.text
            assert made.data["forked_from"] == "src" and made.data["role"] == "reviewer"
            assert made.data["conversation_id"] and made.data["conversation_id"] != src["conversation_id"]
            assert made.data["status"] == "running" and made.data["pane_id"] != src["pane_id"]
            again = await call(s, "session_fork", source="src", name="f")
            assert again.error and again.data["exit_code"] == 5 and "already exists" in again.text

    anyio.run(main)
    copy = mcp_ws.state / "demo-agent" / "conversations"
    assert sorted(p.name for p in copy.glob("*.json")) == sorted(
        f"{r}.json" for r in (src["conversation_id"], _row("f")["conversation_id"])
    )


def _row(name: str) -> dict[str, Any]:
    rows = json.loads(mam("session", "status", "--json", check=True).stdout)
    return next(r for r in rows if r["name"] == name)
