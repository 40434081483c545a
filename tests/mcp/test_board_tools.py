"""The MCP board tools and job_fanout, over stdio, on a real Mosquitto with demo agents."""

from __future__ import annotations

import anyio

from tests.helpers.jobs import create_demo
from tests.mcp.client import call, stdio_session


def test_board_tools_write_read_list_and_refuse_a_stale_version(mcp_ws):
    async def main() -> None:
        async with stdio_session(mcp_ws.root) as s:
            assert (await call(s, "board_list")).data == {"keys": []}
            nothing = await call(s, "board_read", key="plan/next")
            assert nothing.error and nothing.data["exit_code"] == 5
            assert not mcp_ws.state.exists()  # looking made nothing
            made = await call(s, "board_write", key="plan/next", value="step 1")
            assert not made.error and (made.data["version"], made.data["published"]) == (1, True), made.text
            cas = await call(s, "board_write", key="plan/next", value="step 2", if_version=1)
            assert not cas.error and cas.data["version"] == 2
            stale = await call(s, "board_write", key="plan/next", value="lost", if_version=1)
            assert stale.error and stale.data["exit_code"] == 5
            read = await call(s, "board_read", key="plan/next")
            assert {k: read.data[k] for k in ("key", "value", "version")} == {
                "key": "plan/next",
                "value": "step 2",
                "version": 2,
            }
            assert set(read.data) == {"key", "value", "version", "writer", "ts"}
            listed = await call(s, "board_list", prefix="plan/")
            assert [e["key"] for e in listed.data["keys"]] == ["plan/next"]
            bad = await call(s, "board_write", key="Bad Key", value="x")
            assert bad.error and bad.data["exit_code"] == 2
            gone = await call(s, "board_write", key="plan/next", delete=True)
            assert not gone.error and gone.data["deleted"] and gone.data["version"] == 3
            missing = await call(s, "board_read", key="plan/next")
            assert missing.error and missing.data["exit_code"] == 5

    anyio.run(main)


def test_job_fanout_tool_reports_every_provenance(mcp_ws):
    for name in ("f1", "f2"):
        create_demo(name)

    async def main() -> None:
        async with stdio_session(mcp_ws.root) as s:
            out = await call(s, "job_fanout", targets="f1,f2", brief="Say done.", aggregate="all")
            assert not out.error, out.text
            assert out.data["decided"] and out.data["outcome"] == "completed"
            assert sorted(j["target"] for j in out.data["jobs"]) == ["f1", "f2"]
            assert all(j["state"] == "completed" and j["job_id"] for j in out.data["jobs"])

    anyio.run(main)
