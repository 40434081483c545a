"""One instant demo job through `mam mcp` (stdio) against the same job through `mam job delegate`.

Usage: python bench/mcp_roundtrip.py [--jobs 10] [--broker mosquitto|amqtt] [--json]

Set-up (not timed): a temporary workspace with its own HOME, a private tmux server (a unique
socket name), a private broker on a free loopback port (started through its own Popen handle),
one demo agent session, and one `mam mcp` server over stdio driven by the SDK's own client
(`mcp.ClientSession` over `stdio_client`); its start-up and `initialize` are timed apart.

Timed, alternately, `--jobs` times each (after one untimed warm-up of each):
  cli   <venv>/bin/mam job delegate --target tmux:bench --brief "..." --json ... as a fresh process
  mcp   the tool call job_delegate {target, brief, wait: true, ...} on the open session, call to result
Both are the same command run by the workspace's node (the CLI through the `mam` script's thin
client, the MCP tool through mam.node.call), for a job the demo agent completes at once.

Prints the medians and the ratio mcp / cli (target: at most 1.0x). Cleans up everything it
started: the server (its stdin closed), the tmux server (through its own socket), the broker,
the workspace. Exits non-zero only on an error.
"""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path
from typing import Any

sys.path.append(str(Path(__file__).resolve().parents[1]))  # for `bench._support`; mam itself comes from the venv

from bench import _support as support  # noqa: E402

SESSION = support.DEMO_SESSION
JOB_ARGS = {"start_deadline_s": 30, "heartbeat_s": 1}


def cli_job(i: int, env: dict[str, str], root: Path) -> float:
    start = time.perf_counter()
    proc = support.run_mam(
        [
            "job",
            "delegate",
            "--target",
            f"tmux:{SESSION}",
            "--brief",
            f"Benchmark job cli-{i}: nothing to do, report at once.",
            "--json",
            "--start-deadline",
            "30",
            "--heartbeat",
            "1",
        ],
        env,
        root,
    )
    took = (time.perf_counter() - start) * 1000
    record = json.loads(proc.stdout)
    if record.get("state") != "completed":
        raise RuntimeError(f"cli job {record.get('id')} ended {record.get('state')} ({record.get('reason')})")
    return took


async def mcp_job(session: Any, i: int) -> float:
    start = time.perf_counter()
    result = await session.call_tool(
        "job_delegate",
        {
            "target": f"tmux:{SESSION}",
            "brief": f"Benchmark job mcp-{i}: nothing to do, report at once.",
            "wait": True,
            **JOB_ARGS,
        },
    )
    took = (time.perf_counter() - start) * 1000
    data = result.structured_content or {}
    if result.is_error or data.get("state") != "completed":
        raise RuntimeError(
            f"mcp job {data.get('id')} ended {data.get('state')} ({data.get('reason')}): {data.get('error')}"
        )
    return took


async def measure(jobs: int, env: dict[str, str], root: Path) -> dict[str, Any]:
    import anyio
    from mcp import ClientSession, StdioServerParameters, stdio_client

    params = StdioServerParameters(
        command=str(support.VENV_BIN / "mam"), args=["mcp", "--workspace", str(root)], env=env, cwd=str(root)
    )
    cli: list[float] = []
    mcp: list[float] = []
    with open(os.devnull, "w") as quiet:
        started = time.perf_counter()
        async with stdio_client(params, errlog=quiet) as (read, write), ClientSession(read, write) as session:
            await session.initialize()
            ready_ms = (time.perf_counter() - started) * 1000
            await anyio.to_thread.run_sync(cli_job, 0, env, root)  # warm-ups: bytecode cache, SQLite pages, the
            await mcp_job(session, 0)  # server's broker connection, the agent's first prompt
            for i in range(1, jobs + 1):
                cli.append(await anyio.to_thread.run_sync(cli_job, i, env, root))
                mcp.append(await mcp_job(session, i))
                print(f"job {i:2}: cli {cli[-1]:7.1f} ms   mcp {mcp[-1]:7.1f} ms", file=sys.stderr, flush=True)
    return {
        "server_ready_ms": round(ready_ms, 1),
        "cli_ms": [round(x, 1) for x in cli],
        "mcp_ms": [round(x, 1) for x in mcp],
    }


def main(argv: list[str] | None = None) -> int:
    args = support.jobs_args(argv, __doc__, "timed jobs of each kind (default 10)")
    if not support.have_tmux("mcp_roundtrip"):
        return 2

    import anyio

    try:
        with support.demo_workspace("mam-bench-mcp-", args.broker) as bench:
            runs = anyio.run(measure, args.jobs, bench.env, bench.ws.root)
    except Exception as e:  # noqa: BLE001 - one line on stderr, exit 1
        print(f"mcp_roundtrip: error: {e}", file=sys.stderr)
        return 1

    cli, mcp = support.median(runs["cli_ms"]), support.median(runs["mcp_ms"])
    result = {
        "jobs": args.jobs,
        "broker": args.broker,
        "median_ms": {"cli": round(cli, 1), "mcp": round(mcp, 1)},
        "ratio_mcp_over_cli": round(mcp / cli, 2),
        **runs,
        "machine": support.machine(),
    }
    if args.json:
        print(json.dumps(result, indent=2))
        return 0
    print(
        f"\nmedians over {args.jobs} jobs each ({args.broker}): cli {cli:.1f} ms, mcp {mcp:.1f} ms, ratio "
        f"{mcp / cli:.2f}x "
        f"(mcp server ready in {runs['server_ready_ms']:.0f} ms)"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
