"""The MCP server hands its delegations to the workspace's node (mam/mcp/service.py: `mam job delegate --json`
through mam.node.call), as the CLI does: a job from `job_delegate` (returning at delivery or waiting) or from
`job_fanout` is owned by the node while it runs, and shows among the node's open jobs. With MAM_NODE=0, or
MAM_NO_AUTOSTART=1 and no node running, the same command runs in the server's own process and the jobs still
complete. Real tmux, demo agents, a real Mosquitto."""

from __future__ import annotations

import json
from pathlib import Path

import anyio
import pytest

from tests.e2e.test_node import node_pid, owner_pid
from tests.helpers.jobs import create_demo
from tests.helpers.mamcli import mam
from tests.mcp.client import call, stdio_session

QUICK = {"heartbeat_s": 2, "start_deadline_s": 30}


def test_the_jobs_of_job_delegate_and_job_fanout_are_the_nodes_while_they_run(mcp_ws):
    for name in ("w", "v", "f1", "f2"):
        create_demo(name)

    async def main() -> tuple[int, list[str]]:
        async with stdio_session(mcp_ws.root) as s:
            sent = await call(s, "job_delegate", target="w", brief="demo-sleep: 3\ndemo-write: n.txt :: node", **QUICK)
            assert not sent.error, sent.text
            job = sent.data["id"]
            assert sent.data["state"] in ("delivered", "running") and sent.data["attached"] is False
            pid = node_pid(mcp_ws)
            assert pid and owner_pid(mcp_ws, job) == pid  # running, owned by the node
            status = json.loads(mam("node", "status", "--json", check=True).stdout)
            assert status["pid"] == pid and job in status["open_jobs"]
            done = await call(s, "job_wait", id=job, timeout_s=60)
            assert not done.error and done.data["state"] == "completed", done.text
            waited = await call(s, "job_delegate", target="v", brief="demo-write: v.txt :: waited", wait=True, **QUICK)
            assert not waited.error and waited.data["state"] == "completed" and waited.data["exit_code"] == 0
            fan = await call(s, "job_fanout", targets="f1,f2", brief="Say done.", aggregate="all")
            assert not fan.error and fan.data["decided"] is True, fan.text
            return pid, [job, waited.data["id"], *(j["job_id"] for j in fan.data["jobs"])]

    pid, jobs = anyio.run(main)
    assert [owner_pid(mcp_ws, job) for job in jobs] == [pid] * 4
    assert (mcp_ws.root / "n.txt").read_text() == "node\n" and (mcp_ws.root / "v.txt").read_text() == "waited\n"


def _cmdline(pid: int) -> str:
    return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()


@pytest.mark.parametrize("setting", [{"MAM_NODE": "0"}, {"MAM_NO_AUTOSTART": "1"}], ids=["node-0", "no-autostart"])
def test_with_no_node_the_server_runs_the_same_command_itself_and_its_jobs_complete(mcp_ws, setting):
    create_demo("w")

    async def main() -> None:
        async with stdio_session(mcp_ws.root, setting) as s:
            sent = await call(s, "job_delegate", target="w", brief="demo-sleep: 2\ndemo-write: h.txt :: here", **QUICK)
            assert not sent.error, sent.text
            server = owner_pid(mcp_ws, sent.data["id"])
            assert " mcp " in _cmdline(server)  # the server's own process drives it
            done = await call(s, "job_wait", id=sent.data["id"], timeout_s=60)
            assert not done.error and done.data["state"] == "completed", done.text
            waited = await call(s, "job_delegate", target="w", brief="demo-write: h2.txt :: here", wait=True, **QUICK)
            assert not waited.error and waited.data["state"] == "completed", waited.text
            assert owner_pid(mcp_ws, waited.data["id"]) == server
            unknown = await call(s, "job_delegate", target="nobody", brief="x", **QUICK)
            assert unknown.error and unknown.data["exit_code"] == 5 and "nobody" in unknown.text

    anyio.run(main)
    assert (mcp_ws.root / "h.txt").read_text() == "here\n" and (mcp_ws.root / "h2.txt").read_text() == "here\n"
    assert node_pid(mcp_ws) == 0 and not (mcp_ws.state / "run" / "node.sock").exists()
