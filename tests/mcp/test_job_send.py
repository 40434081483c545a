"""The MCP tool `job_send`: the library call of `mam job send`, with its result and its refusals
(real tmux, the demo agent, a real Mosquitto)."""

from __future__ import annotations

import anyio

from mam.jobs.record import read_audit
from mam.sessions.audit import default_by
from mam.util.poll import wait_for
from tests.e2e.test_job_send import running_job, user_turns
from tests.helpers.jobs import capture, create_demo
from tests.helpers.mamcli import mam
from tests.mcp.client import call, stdio_session


def test_job_send_types_once_and_refuses_like_the_cli(mcp_ws, tmux_server):
    s = create_demo("w", behaviour="silent_after_start")
    job = running_job(mcp_ws, tmux_server.name, s)

    async def main() -> None:
        async with stdio_session(mcp_ws.root) as c:
            tool = next(t for t in (await c.list_tools()).tools if t.name == "job_send")
            assert set(tool.input_schema["properties"]) == {"id", "text", "by"}
            bad = await call(c, "job_send", id=job, text="MCP-ESC \x1b[201~")
            assert bad.error and bad.data["exit_code"] == 2 and "control character" in bad.text, bad.text
            sent = await call(c, "job_send", id=job, text="MCP-FOLLOW-UP: one more thing")
            assert not sent.error, sent.text
            assert sent.data["sent"] is True and sent.data["by"] == default_by() and sent.data["bytes"] == 29
            assert sent.text == f"job {job}: sent 29 bytes to pane {s['pane_id']}"
            wait_for(lambda: user_turns(mcp_ws, s, "MCP-FOLLOW-UP") == 1, timeout=30, message="never typed")
            mam("job", "cancel", job, check=True)
            ended = await call(c, "job_send", id=job, text="MCP-LATE")
            assert ended.error and ended.data["exit_code"] == 5 and "not running" in ended.text, ended.text
            unknown = await call(c, "job_send", id="job-0123456789abcdef", text="MCP-LATE")
            assert unknown.error and unknown.data["exit_code"] == 5 and "no job" in unknown.text

    anyio.run(main)
    assert [line["by"] for line in read_audit(mcp_ws, job) if line["kind"] == "sent"] == [default_by()]
    screen = capture(tmux_server.name, s["pane_id"])
    assert screen.count("MCP-FOLLOW-UP") == 1 and "MCP-ESC" not in screen and "MCP-LATE" not in screen
