"""One instant demo job through `mam mcp` (stdio) against the same job through `mam job delegate`.

Usage: python bench/mcp_roundtrip.py [--jobs 10] [--broker mosquitto|amqtt] [--json]

Set-up (not timed): a temporary workspace with its own HOME, a private tmux server (a unique
socket name), a private broker on a free loopback port (started through its own Popen handle),
one demo agent session, and one `mam mcp` server over stdio driven by the SDK's own client
(`mcp.ClientSession` over `stdio_client`); its start-up and `initialize` are timed apart.

Timed, alternately, `--jobs` times each (after one untimed warm-up of each):
  cli   <venv>/bin/mam job delegate --target tmux:bench --brief "..." --json ... as a fresh process
  mcp   the tool call job_delegate {target, brief, wait: true, ...} on the open session, call to result
Both are the same wrapper (one library call), for a job the demo agent completes at once;
the MCP server keeps its registry and its broker connection open between jobs.

Prints the medians and the ratio mcp / cli (target: at most 1.0x). Cleans up everything it
started: the server (its stdin closed), the tmux server (through its own socket), the broker,
the workspace. Exits non-zero only on an error.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

sys.path.append(str(Path(__file__).resolve().parents[1]))  # for `bench._support`; mam itself comes from the venv

from bench import _support as support  # noqa: E402

SESSION = "bench"
JOB_ARGS = {"start_deadline_s": 30, "heartbeat_s": 1}


def run_mam(args: list[str], env: dict[str, str], cwd: Path, timeout: float = 90) -> subprocess.CompletedProcess[str]:
    proc = subprocess.run([str(support.VENV_BIN / "mam"), *args], env=env, cwd=cwd, capture_output=True, text=True, timeout=timeout)
    if proc.returncode != 0:
        raise RuntimeError(f"mam {' '.join(args[:3])} exited {proc.returncode}: {proc.stderr.strip()[-800:]}")
    return proc


def cli_job(i: int, env: dict[str, str], root: Path) -> float:
    start = time.perf_counter()
    proc = run_mam(["job", "delegate", "--target", f"tmux:{SESSION}", "--brief", f"Benchmark job cli-{i}: nothing to do, report at once.",
                    "--json", "--start-deadline", "30", "--heartbeat", "1"], env, root)
    took = (time.perf_counter() - start) * 1000
    record = json.loads(proc.stdout)
    if record.get("state") != "completed":
        raise RuntimeError(f"cli job {record.get('id')} ended {record.get('state')} ({record.get('reason')})")
    return took


async def mcp_job(session: Any, i: int) -> float:
    start = time.perf_counter()
    result = await session.call_tool("job_delegate", {"target": f"tmux:{SESSION}", "brief": f"Benchmark job mcp-{i}: nothing to do, report at once.",
                                                      "wait": True, **JOB_ARGS})
    took = (time.perf_counter() - start) * 1000
    data = result.structured_content or {}
    if result.is_error or data.get("state") != "completed":
        raise RuntimeError(f"mcp job {data.get('id')} ended {data.get('state')} ({data.get('reason')}): {data.get('error')}")
    return took


async def measure(jobs: int, env: dict[str, str], root: Path) -> dict[str, Any]:
    import anyio
    from mcp import ClientSession, StdioServerParameters, stdio_client

    params = StdioServerParameters(command=str(support.VENV_BIN / "mam"), args=["mcp", "--workspace", str(root)], env=env, cwd=str(root))
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
    return {"server_ready_ms": round(ready_ms, 1), "cli_ms": [round(x, 1) for x in cli], "mcp_ms": [round(x, 1) for x in mcp]}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--jobs", type=int, default=10, help="timed jobs of each kind (default 10)")
    parser.add_argument("--broker", choices=("mosquitto", "amqtt"), default="mosquitto", help="private broker to use (default mosquitto)")
    parser.add_argument("--json", action="store_true", help="print the result as JSON")
    args = parser.parse_args(argv)
    if args.jobs <= 0:
        parser.error("--jobs must be positive")
    if shutil.which("tmux") is None:
        print("mcp_roundtrip: error: tmux is not installed", file=sys.stderr)
        return 2

    import anyio

    from bench.delegate_overhead import wait_heartbeaters_gone
    from mam.workspace import Workspace

    root = Path(tempfile.mkdtemp(prefix="mam-bench-mcp-"))
    tmux_name = f"mam-bench-{uuid.uuid4().hex[:8]}"
    broker = None
    ws = Workspace((root / "ws").resolve())
    try:
        ws.root.mkdir()
        home = root / "home"
        for sub in ("", ".config", ".local/share", ".cache"):
            (home / sub).mkdir(parents=True, exist_ok=True)
        broker = (support.start_amqtt if args.broker == "amqtt" else support.start_mosquitto)(root)
        env = support.clean_environ(
            root / "pycache", MAM_WORKSPACE=str(ws.root), MAM_TMUX_SERVER=tmux_name, MQTT_BROKER=broker.host, MQTT_PORT=str(broker.port),
            HOME=str(home), XDG_CONFIG_HOME=str(home / ".config"), XDG_DATA_HOME=str(home / ".local/share"),
            XDG_CACHE_HOME=str(home / ".cache"), SHELL="/bin/sh", MAM_DEMO_BEHAVIOUR="ok",
            PATH=os.pathsep.join([str(support.VENV_BIN), os.environ.get("PATH", os.defpath)]),
        )
        run_mam(["session", "create", "--agent", "demo", "--role", "dev", "--session", SESSION, "--json"], env, ws.root)
        runs = anyio.run(measure, args.jobs, env, ws.root)
    except Exception as e:  # noqa: BLE001 - one line on stderr, exit 1
        print(f"mcp_roundtrip: error: {e}", file=sys.stderr)
        return 1
    finally:
        support.kill_tmux(tmux_name)
        wait_heartbeaters_gone(ws)
        if broker is not None:
            broker.stop()
        shutil.rmtree(root, ignore_errors=True)

    cli, mcp = support.median(runs["cli_ms"]), support.median(runs["mcp_ms"])
    result = {"jobs": args.jobs, "broker": args.broker, "median_ms": {"cli": round(cli, 1), "mcp": round(mcp, 1)},
              "ratio_mcp_over_cli": round(mcp / cli, 2), **runs, "machine": support.machine()}
    if args.json:
        print(json.dumps(result, indent=2))
        return 0
    print(f"\nmedians over {args.jobs} jobs each ({args.broker}): cli {cli:.1f} ms, mcp {mcp:.1f} ms, ratio {mcp / cli:.2f}x "
          f"(mcp server ready in {runs['server_ready_ms']:.0f} ms)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
