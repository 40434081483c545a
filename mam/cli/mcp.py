"""`mam mcp [--http --host --port]`: serve mam's tools to an MCP client (an orchestrating agent)."""

from __future__ import annotations

import os
from pathlib import Path

import click

from mam.cli.common import App, echo, workspace_option
from mam.errors import UsageError
from mam.mcp.run import serve_http, serve_stdio
from mam.mcp.service import Service
from mam.mcp.token import server_token
from mam.outcomes import Exit
from mam.util.hosts import is_loopback
from mam.util.trust import check_path

MCP_HELP = """Serve mam's tools (sessions, jobs, loops) to an MCP client, over stdio (default) or Streamable HTTP.

\b
Each tool is the same library call as its CLI command, with the fields of its --json as
structured content; a refusal is a tool error carrying the CLI's exit_code. Looking starts
nothing: no broker, server or pane until a tool needs one.
--http serves http://HOST:PORT/mcp (loopback by default) and requires
`Authorization: Bearer <token>`: MAM_MCP_TOKEN, else the token in .mam/mcp-token (0600,
made on first use). A --host that is not loopback needs --tls-cert and --tls-key (it then
serves https); every request's Host header must name the address served (else 421), so a web
page cannot reach the server through a name of its own (DNS rebinding). Its delegations run in
the workspace's node, as `mam job delegate`'s do, and outlive the server; with no node
(MAM_NODE=0, or MAM_NO_AUTOSTART=1 with none running) they run in the server, and those still
open are handed to `mam job delegate --job-id` when it exits.

\b
Exit codes:
  0    stopped: the client closed stdio, or SIGTERM
  2    bad options or settings (for example a .mam/mcp-token others can read, or a
       non-loopback --host without --tls-cert and --tls-key)
  130  interrupted (Ctrl-C)
"""


@click.command("mcp", help=MCP_HELP)
@workspace_option
@click.option("--http", "http", is_flag=True, help="Serve Streamable HTTP instead of stdio.")
@click.option(
    "--host", default="127.0.0.1", show_default=True, help="With --http: the address to bind (keep it loopback)."
)
@click.option("--port", type=click.IntRange(1, 65535), default=8765, show_default=True, help="With --http: the port.")
@click.option(
    "--tls-cert", default=None, help="With --http: a PEM certificate file; serve https (needed off loopback)."
)
@click.option(
    "--tls-key", default=None, help="With --http: the PEM private key of --tls-cert (yours, not writable by others)."
)
@click.pass_obj
def mcp(app: App, http: bool, host: str, port: int, tls_cert: str | None, tls_key: str | None) -> int:

    tls = check_tls(http, host, tls_cert, tls_key)
    ws, settings = app.ws, app.settings
    service = Service(ws=ws, settings=settings, environ=os.environ)
    if not http:
        serve_stdio(service, poll_s=settings.poll_s)
        return Exit.OK

    token, source = server_token(ws, settings)
    if not is_loopback(host):
        echo(
            f"mam: warning: serving on {host}, not loopback: anyone who can reach it and holds the token drives your "
            "agents",
            err=True,
        )
    serve_http(
        service,
        host=host,
        port=port,
        token=token,
        poll_s=settings.poll_s,
        announce=lambda url: echo(f"mam: mcp: serving {url} (bearer token from {source})", err=True),
        tls=tls,
    )
    return Exit.OK


def check_tls(http: bool, host: str, cert: str | None, key: str | None) -> tuple[str, str] | None:
    """(cert, key) to serve https with, None for plain http on loopback; UsageError (exit 2) otherwise."""

    if (cert or key) and not http:
        raise UsageError("--tls-cert and --tls-key go with --http")
    if bool(cert) != bool(key):
        raise UsageError("give both --tls-cert and --tls-key")
    if http and not cert and not is_loopback(host):
        raise UsageError(
            f"--host {host} is not loopback: serving the bearer token and your agents in plain HTTP there is refused; "
            "give --tls-cert and --tls-key (or keep --host 127.0.0.1)"
        )
    if not cert or not key:
        return None
    for flag, path in (("--tls-cert", cert), ("--tls-key", key)):
        if not Path(path).is_file():
            raise UsageError(f"{flag} {path}: no such file")
    check_path(Path(key), what="TLS key")  # another user's key, or one others may write, is refused
    return cert, key
