"""`mam mcp` names mam's version in serverInfo, and its tool errors read as the CLI's messages do."""

from __future__ import annotations

import os
import sys

import anyio
from mcp import ClientSession, StdioServerParameters, stdio_client

import mam
from tests.helpers.jobs import create_demo
from tests.helpers.mamcli import mam as run_mam
from tests.mcp.client import call

QUICK = {"heartbeat_s": 2, "start_deadline_s": 30}


def test_server_info_names_mams_version_and_errors_carry_the_clis_text(mcp_ws):
    create_demo("dev-1", behaviour="error")
    cli_unknown = run_mam("job", "delegate", "--target", "dev-2", "--brief", "x")
    cli_failed = run_mam("job", "delegate", "--target", "dev-1", "--brief", "do it", "--heartbeat", "2")
    assert cli_unknown.returncode == 5 and cli_failed.returncode == 1
    cli_failed_line = cli_failed.stderr.splitlines()[-1]
    cli_job = cli_failed.stderr.splitlines()[0]

    async def main() -> None:
        params = StdioServerParameters(
            command=sys.executable,
            args=["-m", "mam", "mcp", "--workspace", str(mcp_ws.root)],
            env=dict(os.environ),
            cwd=str(mcp_ws.root),
        )
        with open(os.devnull, "w") as quiet:
            async with stdio_client(params, errlog=quiet) as (read, write), ClientSession(read, write) as s:
                init = await s.initialize()
                assert (init.server_info.name, init.server_info.version) == ("mam", mam.__version__)
                unknown = await call(s, "job_delegate", target="dev-2", brief="x", **QUICK)
                assert unknown.error and unknown.data["exit_code"] == 5
                assert unknown.text == cli_unknown.stderr.strip()  # `mam: error: no session named 'dev-2' ...`
                failed = await call(s, "job_delegate", target="dev-1", brief="do it", wait=True, **QUICK)
                assert failed.error and failed.data["exit_code"] == 1
                assert failed.text == cli_failed_line.replace(cli_job, failed.data["id"])

    anyio.run(main)
