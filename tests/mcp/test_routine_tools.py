"""The MCP routine tools over stdio, with the node that fires routines (started by routine_add), a real
Mosquitto and a demo agent."""

from __future__ import annotations

import anyio

from tests.helpers.jobs import create_demo
from tests.helpers.mamcli import mam
from tests.mcp.client import call, stdio_session


def test_routine_tools_add_list_run_and_log_through_the_node(mcp_ws):
    create_demo("w")

    async def main() -> None:
        async with stdio_session(mcp_ws.root) as s:
            assert (await call(s, "routine_list")).data == {"routines": []}
            bad = await call(s, "routine_add", name="Bad Name", target="w", brief="b", every="1h")
            assert bad.error and bad.data["exit_code"] == 2
            worse = await call(s, "routine_add", name="r", target="w", brief="b", every="1x")
            assert worse.error and worse.data["exit_code"] == 2 and "--every" in worse.data["error"]
            added = await call(s, "routine_add", name="r", target="w", brief="say hi", every="1h", catch_up="once")
            assert not added.error, added.text
            assert (added.data["schedule"], added.data["catch_up"], "secret" in added.data) == (
                "every 1h",
                "once",
                False,
            )
            listed = await call(s, "routine_list")
            assert [r["name"] for r in listed.data["routines"]] == ["r"]
            ran = await call(s, "routine_run", name="r")
            assert not ran.error and ran.data["job"] and ran.data["trigger"] == "run", ran.text
            done = mam("job", "wait", ran.data["job"], "--json")
            assert done.returncode == 0, done.stderr
            log = await call(s, "routine_log", name="r")
            assert [(t["trigger"], t["job"]) for t in log.data["receipts"]] == [("run", ran.data["job"])]
            missing = await call(s, "routine_log", name="nope")
            assert missing.error and missing.data["exit_code"] == 5

    try:
        anyio.run(main)
    finally:
        mam("node", "stop")  # an enabled routine keeps the node: it never ends for idleness
