"""`mam web`: serve the page to watch and steer the workspace from a browser, in the foreground."""

from __future__ import annotations

import sys

import click

from mam.cli.common import App, echo, workspace_option
from mam.jobs.outcomes import Exit
from mam.web.serve import DEFAULT_PORT, Served, serve

WEB_HELP = """Serve a live page of the workspace to a browser, a phone's included, until Ctrl-C.

\b
The page shows what `mam top` shows, from the same source: sessions with their state
dot and where it came from, open jobs with their deadline bars, last progress and
queue place, loops with their round and verdicts. It follows `mam tail`'s feed and
changes within 2 s, with no reload, and says when the broker is unreachable. From it
you may cancel a job (as `mam job cancel`, after a confirmation) and read a session's
recent screen (read-only). It never starts a broker, a pane or a session.

\b
Access: loopback by default. A non-loopback --host needs --tls-cert and --tls-key.
The token is MAM_WEB_TOKEN, else the one in .mam/web-token (0600, made on first use).
mam web prints a link holding it: open it once; it sets an HttpOnly, SameSite=Strict
cookie and takes you to the page without the token. Scripts may send
`Authorization: Bearer <token>` to GET /api/state. A request naming another host
(DNS rebinding) gets 421; without the cookie or the token, 401 and no data; a change
without the page's CSRF token, 403.

\b
Exit codes:
  0    stopped (SIGTERM)
  2    bad options: a non-loopback --host without TLS, a wildcard address, a port in use
  130  interrupted (Ctrl-C)

\b
Examples:
  mam web
  mam web --port 0
  mam web --host 192.168.1.20 --tls-cert cert.pem --tls-key key.pem
"""


@click.command("web", help=WEB_HELP)
@workspace_option
@click.option("--host", default="127.0.0.1", show_default=True, help="The address to serve (and browsers name).")
@click.option(
    "--port",
    type=click.IntRange(0, 65535),
    default=DEFAULT_PORT,
    show_default=True,
    help="The port (0: a free one, printed).",
)
@click.option("--tls-cert", type=click.Path(exists=True, dir_okay=False), help="TLS certificate file (PEM).")
@click.option("--tls-key", type=click.Path(exists=True, dir_okay=False), help="TLS private key file (PEM).")
@click.pass_obj
def web(app: App, host: str, port: int, tls_cert: str | None, tls_key: str | None) -> int:

    def announce(served: Served) -> None:
        echo(f"mam web: serving {served.url} (token from {served.token_source})")
        echo("open this link once (it sets a cookie, then drops the token from the address):")
        echo(f"  {served.login}")
        sys.stdout.flush()

    serve(app.ws, app.settings, host=host, port=port, tls_cert=tls_cert, tls_key=tls_key, announce=announce)
    return Exit.OK
