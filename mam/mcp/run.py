"""Running the server: over stdio until the client closes it, or over Streamable HTTP behind a bearer token.

A client that goes away (and takes a stdio server with it) leaves its jobs running: the workspace's
node runs them. Only jobs this server drives itself (no node may run them: MAM_NODE=0) are handed,
on the way out, to detached `mam job delegate --job-id` processes.
"""

from __future__ import annotations

import hmac
import logging
import signal
import sys
from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any

from mam.mcp.service import Service
from mam.outcomes import Exit
from mam.util.hosts import allowed_hosts

log = logging.getLogger(__name__)
Scope = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[MutableMapping[str, Any]]]
Send = Callable[[MutableMapping[str, Any]], Awaitable[None]]


class HostCheck:
    """ASGI middleware: a request whose `Host` header does not name the served address gets 421 and
    reaches nothing (not even the token check)."""

    def __init__(self, app: Any, allowed: frozenset[bytes]) -> None:
        self.app, self.allowed = app, allowed

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] in ("http", "websocket"):
            given = dict(scope.get("headers") or []).get(b"host", b"").lower()
            if given not in self.allowed:
                if scope["type"] == "websocket":
                    await send({"type": "websocket.close", "code": 1008})
                    return
                body = b'{"error":"misdirected: the Host header does not name the address this server serves"}'
                await send(
                    {
                        "type": "http.response.start",
                        "status": 421,
                        "headers": [
                            (b"content-type", b"application/json"),
                            (b"content-length", str(len(body)).encode()),
                        ],
                    }
                )
                await send({"type": "http.response.body", "body": body})
                return
        await self.app(scope, receive, send)


class BearerAuth:
    """ASGI middleware: an HTTP request without `Authorization: Bearer <token>` gets 401 and reaches no tool."""

    def __init__(self, app: Any, token: str) -> None:
        self.app, self.expected = app, f"Bearer {token}".encode()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] in ("http", "websocket"):  # only the lifespan passes unchecked
            given = dict(scope.get("headers") or []).get(b"authorization", b"")
            if not hmac.compare_digest(given, self.expected):
                if scope["type"] == "websocket":
                    await send({"type": "websocket.close", "code": 1008})
                    return
                body = b'{"error":"unauthorized: send Authorization: Bearer <token> (MAM_MCP_TOKEN or .mam/mcp-token)"}'
                await send(
                    {
                        "type": "http.response.start",
                        "status": 401,
                        "headers": [
                            (b"content-type", b"application/json"),
                            (b"www-authenticate", b'Bearer realm="mam"'),
                            (b"content-length", str(len(body)).encode()),
                        ],
                    }
                )
                await send({"type": "http.response.body", "body": body})
                return
        await self.app(scope, receive, send)


def _exit_on_sigterm() -> None:
    def stop(_sig: int, _frame: Any) -> None:
        raise SystemExit(Exit.OK)

    signal.signal(signal.SIGTERM, stop)


def serve_stdio(service: Service, *, poll_s: float) -> None:
    import anyio

    from mam.mcp.server import build

    server = build(service, poll_s=poll_s)
    _exit_on_sigterm()
    try:
        anyio.run(server.run_stdio_async)
    finally:
        _hand_over(service)


def serve_http(
    service: Service,
    *,
    host: str,
    port: int,
    token: str,
    poll_s: float,
    announce: Callable[[str], None],
    tls: tuple[str, str] | None = None,
) -> None:
    """Serve on host:port; `tls` (cert file, key file) makes it HTTPS. The caller has checked that a
    non-loopback host has TLS (mam.cli.mcp)."""
    import anyio
    import uvicorn

    from mam.mcp.server import build

    server = build(service, poll_s=poll_s)
    hosts = frozenset(h.encode() for h in allowed_hosts(host, port, tls=tls is not None))
    app = HostCheck(BearerAuth(server.streamable_http_app(host=host), token), hosts)
    config = uvicorn.Config(
        app,
        host=host,
        port=port,
        log_level="warning",
        lifespan="on",
        ssl_certfile=tls[0] if tls else None,
        ssl_keyfile=tls[1] if tls else None,
    )
    web = uvicorn.Server(config)
    scheme = "https" if tls else "http"
    announce(f"{scheme}://{host if ':' not in host else '[' + host + ']'}:{port}/mcp")
    # uvicorn stops on SIGINT/SIGTERM, then raises the signal again under the handler it found:
    # ours, so the open jobs are handed over before the process ends.
    _exit_on_sigterm()
    try:
        anyio.run(web.serve)
    finally:
        _hand_over(service)


def _hand_over(service: Service) -> None:
    handed = service.close()
    if handed:
        print(
            f"mam: mcp: {len(handed)} open job(s) handed to `mam job delegate --job-id`: {', '.join(handed)}",
            file=sys.stderr,
        )
