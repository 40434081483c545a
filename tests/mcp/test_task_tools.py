"""The MCP task tools over stdio (issue 42), with the node that wakes tasks (started by task_add), a real
Mosquitto and demo agents: a task blocked by another runs once that one is marked done."""

from __future__ import annotations

import anyio

from mam.util.poll import wait_for
from tests.helpers.jobs import create_demo
from tests.helpers.mamcli import mam, mam_json
from tests.mcp.client import call, stdio_session


def test_task_tools_add_list_show_and_done_through_the_node(mcp_ws):
    create_demo("w")
    mam("role", "add", "dev", "--session", "w", check=True)

    async def main() -> None:
        async with stdio_session(mcp_ws.root) as s:
            assert (await call(s, "task_list")).data == {"tasks": []}
            bad = await call(s, "task_add", title="x", role="Bad Role")
            assert bad.error and bad.data["exit_code"] == 2
            nobody = await call(s, "task_add", title="x", role="ghost")
            assert nobody.error and nobody.data["exit_code"] == 5
            first = await call(s, "task_add", title="Draft", role="dev", brief="demo-disposition: review")
            assert not first.error, first.text
            a = first.data["id"]
            second = await call(s, "task_add", title="Publish", role="dev", blocked_by=[a], parent=a)
            assert not second.error and second.data["blocked_by"] == [a], second.text
            b = second.data["id"]
            assert second.data["queued_for"] == "blockers" and second.data["job"] is None
            wait_for(lambda: mam_json("task", "show", a)["state"] == "in_review", timeout=60, message="no review")
            shown = await call(s, "task_show", task=b)
            assert (shown.data["state"], shown.data["queued_for"], shown.data["job"]) == ("todo", "blockers", None)
            listed = await call(s, "task_list")
            assert [(t["id"], t["depth"]) for t in listed.data["tasks"]] == [(a, 0), (b, 1)]
            done = await call(s, "task_done", task=a)
            assert not done.error and done.data["state"] == "done", done.text
            wait_for(lambda: mam_json("task", "show", b)["state"] == "done", timeout=60, message=f"{b} did not run")
            shown = await call(s, "task_show", task=b)
            assert [w["reason"] for w in shown.data["wakes"]] == ["blockers_resolved"]
            missing = await call(s, "task_show", task="t-999")
            assert missing.error and missing.data["exit_code"] == 5

    try:
        anyio.run(main)
    finally:
        mam("node", "stop")
