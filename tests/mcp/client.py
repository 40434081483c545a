"""Driving `mam mcp` with the SDK's own client: over stdio (a server process per session) and over
Streamable HTTP (one `mam mcp --http` process, started and stopped through its own handle)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager, contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx2
from mcp import ClientSession, StdioServerParameters, stdio_client
from mcp.client.streamable_http import streamable_http_client

from mam.broker.embedded import free_port, port_accepts
from mam.util.poll import wait_for
from tests.helpers.mamcli import mam


def job_state(job_id: str) -> str:
    """The job's state as `mam job status --json` (a fresh process) reads it."""
    return json.loads(mam("job", "status", job_id, "--json", check=True).stdout)["state"]


@dataclass
class Call:
    """A tool result as the tests read it, with the progress notifications the client received."""

    error: bool
    data: dict[str, Any]
    text: str
    progress: list[str] = field(default_factory=list)


async def call(session: ClientSession, name: str, /, progress: bool = False, **arguments: Any) -> Call:
    seen: list[str] = []

    async def on_progress(_value: float, _total: float | None, message: str | None) -> None:
        seen.append(message or "")

    result = await session.call_tool(name, arguments, progress_callback=on_progress if progress else None)
    text = "".join(getattr(c, "text", "") for c in result.content)
    return Call(bool(result.is_error), dict(result.structured_content or {}), text, seen)


@asynccontextmanager
async def stdio_session(ws: Path, env: dict[str, str] | None = None) -> AsyncIterator[ClientSession]:
    params = StdioServerParameters(
        command=sys.executable,
        args=["-m", "mam", "mcp", "--workspace", str(ws)],
        env={**os.environ, **(env or {})},
        cwd=str(ws),
    )
    with open(os.devnull, "w") as quiet:
        async with stdio_client(params, errlog=quiet) as (read, write), ClientSession(read, write) as session:
            await session.initialize()
            yield session


@dataclass
class HttpServer:
    url: str
    token: str
    proc: subprocess.Popen[bytes]
    log: Path

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(15)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(5)


@contextmanager
def http_server(
    ws: Path, token: str, env: dict[str, str] | None = None, args: tuple[str, ...] = (), scheme: str = "http"
) -> Iterator[HttpServer]:
    port = free_port()
    log = ws.parent / f"mcp-http-{port}.log"
    with open(log, "wb") as out:
        proc = subprocess.Popen(
            [sys.executable, "-m", "mam", "mcp", "--workspace", str(ws), "--http", "--port", str(port), *args],
            env={**os.environ, "MAM_MCP_TOKEN": token, **(env or {})},
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=out,
        )
    server = HttpServer(f"{scheme}://127.0.0.1:{port}/mcp", token, proc, log)
    try:
        wait_for(
            lambda: port_accepts(port) or (proc.poll() is not None and _died(log)),
            timeout=30,
            message="mam mcp --http never listened",
        )
        yield server
    finally:
        server.stop()


def _died(log: Path) -> bool:
    raise AssertionError(f"mam mcp --http exited early:\n{log.read_text(errors='replace')}")


@asynccontextmanager
async def http_session(url: str, token: str | None) -> AsyncIterator[ClientSession]:
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    async with (
        httpx2.AsyncClient(headers=headers, timeout=httpx2.Timeout(30, read=300)) as client,
        streamable_http_client(url, http_client=client) as (read, write),
        ClientSession(read, write) as session,
    ):
        await session.initialize()
        yield session
