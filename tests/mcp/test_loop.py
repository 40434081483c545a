"""`loop_start` + `loop_status` through the MCP client: a creator and two demo reviewers, in a git workspace."""

from __future__ import annotations

from pathlib import Path

import anyio

from tests.helpers.jobs import create_demo
from tests.loop.gitrepo import git, make_repo
from tests.mcp.client import call, stdio_session

TASK = "demo-write: feature.txt :: the feature\ndemo-commit: add the feature"


def test_loop_start_returns_an_id_at_once_and_loop_status_reaches_passed(mcp_ws):
    make_repo(mcp_ws.root)
    create_demo("creator")
    create_demo("rev-a", role="reviewer")
    create_demo("rev-b", role="reviewer")

    go = mcp_ws.root / "go"  # the creator works until it exists: the first loop still runs at the second start
    held = f"demo-await: {go}\n{TASK}"

    async def main() -> dict:
        async with stdio_session(mcp_ws.root) as s:
            started = await call(
                s,
                "loop_start",
                creator="creator",
                reviewer="rev-a,rev-b",
                task=held,
                heartbeat_s=1,
                start_deadline_s=15,
                timeout_s=90,
            )
            assert not started.error, started.text
            loop_id = started.data["id"]
            assert started.data["state"] == "running" and loop_id.startswith("loop-")
            first = await call(s, "loop_status", id=loop_id)
            assert not first.error and first.data["id"] == loop_id
            again = await call(s, "loop_start", creator="creator", reviewer="rev-a,rev-b", task=TASK)
            assert again.error and again.data["exit_code"] == 4  # one loop per checkout: the running one is named
            assert loop_id in again.text
            go.touch()

            async def state() -> str:
                return str((await call(s, "loop_status", id=loop_id)).data["state"])

            with anyio.fail_after(150):
                while await state() == "running":
                    await anyio.sleep(0.2)
            return (await call(s, "loop_status", id=loop_id)).data

    status = anyio.run(main)
    assert status["state"] == "passed" and status["exit_code"] == 0 and status["rounds"] == 1
    assert [(r["reviewer"], r["verdict"]) for r in status["final"]] == [("rev-a", "PASS"), ("rev-b", "PASS")]
    assert len(status["reports"]) == 2 and all(Path(p).is_file() for p in status["reports"])
    assert status["promoted"] and all(Path(p).is_file() for p in status["promoted"])
    assert (mcp_ws.root / "feature.txt").read_text() == "the feature\n"


def test_loop_start_with_approve_waits_and_loop_approve_merges(mcp_ws):
    """session_create with worktree, loop_start with approve, loop_status in needs_approval, loop_approve."""
    make_repo(mcp_ws.root)
    create_demo("rev", role="reviewer")

    async def main() -> tuple[dict, dict]:
        async with stdio_session(mcp_ws.root) as s:
            made = await call(s, "session_create", agent="demo", role="dev", name="creator", worktree=True)
            assert not made.error, made.text
            assert made.data["branch"] == "mam/creator" and made.data["worktree"].endswith(".mam/worktrees/creator")
            started = await call(
                s,
                "loop_start",
                creator="creator",
                reviewer="rev",
                task=TASK,
                approve=True,
                heartbeat_s=1,
                start_deadline_s=15,
                timeout_s=90,
            )
            assert not started.error, started.text
            loop_id = started.data["id"]

            async def status() -> dict:
                return (await call(s, "loop_status", id=loop_id)).data

            with anyio.fail_after(150):
                while (waiting := await status())["state"] != "needs_approval":
                    assert waiting["state"] == "running", waiting
                    await anyio.sleep(0.2)
            approved = await call(s, "loop_approve", id=loop_id, merge="squash")
            assert not approved.error, approved.text
            with anyio.fail_after(60):
                while (done := await status())["state"] != "approved" or done["exit_code"] is None:
                    await anyio.sleep(0.2)
            return waiting, approved.data

    waiting, gate = anyio.run(main)
    identity = waiting["approval"]["identity"]
    decision = gate["decision"]
    assert decision["mode"] == "squash" and decision["via"] == "mcp"
    # One squashed commit on main, holding exactly the reviewed tree.
    assert git(mcp_ws.root, "rev-parse", "main^{tree}") == identity["tree"]
    assert git(mcp_ws.root, "rev-parse", "main") == decision["merged"]
    assert git(mcp_ws.root, "rev-list", "--count", "main") == "2"
    assert (mcp_ws.root / "feature.txt").read_text() == "the feature\n"
