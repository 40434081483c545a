"""`mam web`: ask the workspace's node to serve the page (starting a node when none runs), print where.

The page itself is mam.web (`build_app`); here is only who serves it: the node (a thread of it, op
`web` on its socket, mam.node.server), or this process in the foreground when asked (--foreground)
or when no node may be started (MAM_NODE=0, MAM_NO_AUTOSTART=1 with none running).
"""

from __future__ import annotations

import os
import sys

import click

from mam.cli.common import App, echo, workspace_option
from mam.errors import MamError
from mam.node import client
from mam.node.wire import SOCKET
from mam.outcomes import Exit
from mam.web.serve import DEFAULT_PORT, Served, check_address, serve, web_token

WEB_TIMEOUT_S = 60.0  # for the node to import the server, bind and be up (a loaded 2-core machine)

WEB_HELP = """Serve a live page of the workspace to a browser, a phone's included, from the workspace's node.

\b
The page shows what `mam top` shows, from the same source: sessions with their state
dot and where it came from, open jobs with their deadline bars, last progress and
queue place, loops with their round and verdicts. It follows `mam tail`'s feed and
changes within 2 s, with no reload, and says when the broker is unreachable. From it
you may cancel a job (as `mam job cancel`, after a confirmation), approve a loop, answer
a permission prompt a session waits on (allow once / deny, only while its pane shows
exactly that prompt), and read a session's recent screen (read-only).

\b
The workspace's node serves it (one is started in the background when none runs):
`mam web` prints the address and returns, and the node serves the page until
`mam web --stop` or `mam node stop` (it does not end for idleness meanwhile; it does
end when mam's code on disk changes: run `mam web` again). `mam node status` shows
where it serves. Asked again, `mam web` prints the same address. With --foreground,
or when no node may be started (MAM_NODE=0; MAM_NO_AUTOSTART=1 and none runs), it
serves in this process until Ctrl-C.

\b
Access: loopback by default. A non-loopback --host needs --tls-cert and --tls-key.
mam web prints a login link: it works once, within 5 minutes (run mam web again for
another). Opened, it logs that browser tab in: an HttpOnly, SameSite=Strict cookie and
a per-login secret the page keeps in sessionStorage and sends with every request. A
login lasts MAM_WEB_LOGIN_TTL_S (12 h); --logout-all ends every login at once. The
cookie alone opens nothing (browsers send it to every port of the host): 401 and no
data. Scripts may send `Authorization: Bearer <token>` (MAM_WEB_TOKEN, else the one
in .mam/web-token, 0600, made on first use) to read, never to change. A request naming
another host (DNS rebinding) gets 421; a change from another origin, 403.

\b
Exit codes:
  0    served (by the node); stopped (--stop; SIGTERM with --foreground); logins ended (--logout-all)
  1    the node could not be started or did not serve the page (see .mam/run/node.log)
  2    bad options: a non-loopback --host without TLS, a wildcard address, a port in use,
       or the node serves the page already at another address or with another token
  130  interrupted (Ctrl-C, --foreground)

\b
Examples:
  mam web
  mam web --port 0
  mam web --host 192.168.1.20 --tls-cert cert.pem --tls-key key.pem
  mam web --stop
  mam web --logout-all
"""


def announce(served: Served) -> None:
    echo(f"mam web: serving {served.url} (bearer token for scripts from {served.token_source})")
    echo("open this login link within 5 minutes; it works once (mam web prints another):")
    echo(f"  {served.login}")
    sys.stdout.flush()


def _start_node(app: App) -> None:
    app.ws.ensure_state()
    started = client.start(str(app.ws.root), str(app.ws.run_dir))
    if started is None:
        raise MamError(f"could not start the workspace's node; see {app.ws.run_dir / 'node.log'}")
    started.close()


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
@click.option("--foreground", is_flag=True, help="Serve in this process until Ctrl-C, not in the node.")
@click.option("--stop", is_flag=True, help="Stop the page the node serves (the node ends later if idle).")
@click.option("--logout-all", is_flag=True, help="End every login to the page the node serves, and every unused link.")
@click.pass_obj
def web(
    app: App,
    host: str,
    port: int,
    tls_cert: str | None,
    tls_key: str | None,
    foreground: bool,
    stop: bool,
    logout_all: bool,
) -> int:
    path = str(app.ws.run_dir / SOCKET)
    if logout_all:
        answer = client.ask(path, "web_logout", timeout=WEB_TIMEOUT_S)
        if answer and answer.get("url"):
            echo(f"mam web: ended {answer['ended']} login(s) to {answer['url']}; `mam web` prints a new link")
        else:
            echo("mam web: the workspace's node serves no page (a --foreground page's logins end with it)")
        return Exit.OK
    if stop:
        answer = client.ask(path, "web_stop", timeout=WEB_TIMEOUT_S)
        if answer and answer.get("stopped"):
            echo(f"mam web: stopped serving {answer['stopped']}")
        else:
            echo("mam web: the workspace's node serves no page")
        return Exit.OK
    tls_cert, tls_key = (os.path.abspath(p) if p else None for p in (tls_cert, tls_key))
    check_address(host, tls_cert=tls_cert, tls_key=tls_key)
    settings = app.settings
    running = client.connect(path)
    if running is not None:
        running.close()
    if foreground or not settings.node or (running is None and settings.no_autostart):
        serve(app.ws, settings, host=host, port=port, tls_cert=tls_cert, tls_key=tls_key, announce=announce)
        return Exit.OK
    token, source = web_token(app.ws, settings)
    if running is None:
        _start_node(app)
    fields = {"host": host, "port": port, "token": token, "token_source": source}
    answer = client.ask(path, "web", WEB_TIMEOUT_S, tls_cert=tls_cert, tls_key=tls_key, **fields)
    if answer is None:  # the node that took the connection was ending (idle: a page just stopped): once more
        _start_node(app)
        answer = client.ask(path, "web", WEB_TIMEOUT_S, tls_cert=tls_cert, tls_key=tls_key, **fields)
    if answer is None:
        raise MamError(f"the workspace's node did not answer; see {app.ws.run_dir / 'node.log'}")
    if "refused" in answer:
        echo(f"mam: error: {answer['refused']}", err=True)
        return int(answer.get("exit_code") or Exit.FAILED)
    announce(Served(url=str(answer["url"]), login=str(answer["login"]), token_source=str(answer["token_source"])))
    echo(f"served by the workspace's node (pid {answer.get('pid', '?')}) until: mam web --stop")
    return Exit.OK
