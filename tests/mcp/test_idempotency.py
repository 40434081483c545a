"""`job_delegate` with `idempotency_key` / `dedup` over MCP: a second call attaches, nothing is typed twice."""

from __future__ import annotations

import anyio

from mam.jobs.attach import dedup_key
from tests.helpers.jobs import capture, create_demo
from tests.mcp.client import call, stdio_session

QUICK = {"heartbeat_s": 2, "start_deadline_s": 30}


def test_a_second_delegation_with_the_key_attaches_to_the_open_job_and_waits_for_its_end(mcp_ws, tmux_server):
    row = create_demo("w")

    async def main() -> tuple[str, str]:
        async with stdio_session(mcp_ws.root) as s:
            brief = "demo-sleep: 1\ndemo-write: out.txt :: once"
            first = await call(s, "job_delegate", target="w", brief=brief, idempotency_key="mcp-1", **QUICK)
            assert not first.error and first.data["attached"] is False, first.text
            second = await call(s, "job_delegate", target="w", brief=brief, idempotency_key="mcp-1", wait=True, **QUICK)
            assert not second.error, second.text
            assert second.data["id"] == first.data["id"] and second.data["attached"] is True
            assert second.data["state"] == "completed" and second.data["exit_code"] == 0
            ended = await call(s, "job_delegate", target="w", brief=brief, idempotency_key="mcp-1")
            assert not ended.error and ended.data["attached"] is True and ended.data["id"] == first.data["id"]
            assert ended.data["state"] == "completed" and ended.data["result"]  # the ended job's outcome
            deduped = await call(s, "job_delegate", target="w", brief="demo-write: d.txt :: d", dedup=True, wait=True)
            assert not deduped.error and deduped.data["idempotency_key"] == dedup_key("w", "demo-write: d.txt :: d")
            bad = await call(s, "job_delegate", target="w", brief=brief, idempotency_key="no spaces")
            assert bad.error and bad.data["exit_code"] == 2 and "invalid idempotency key" in bad.text
            return first.data["id"], first.data["nonce"]

    _job_id, nonce = anyio.run(main)
    assert capture(tmux_server.name, row["pane_id"]).count(nonce) == 1
    assert (mcp_ws.root / "out.txt").read_text() == "once\n"
