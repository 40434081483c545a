"""Serving the page: the address checks, the token, the socket, uvicorn in a thread (`Hosted`); in the
workspace's node (until `mam web --stop` or the node's end) or in the `mam web --foreground` process
(`serve`, until Ctrl-C). Both serve the one app `mam.web.app.build_app` makes.

The checks come first and refuse before anything is bound or written: a non-loopback address
needs TLS (a cookie and a token must not cross a network in clear), and the address must be one a
browser names (the Host header is checked), so a wildcard such as 0.0.0.0 is refused.
"""

from __future__ import annotations

import logging
import signal
import socket
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from mam.errors import MamError, UsageError
from mam.settings import Settings
from mam.util.hosts import authority, is_loopback, is_wildcard
from mam.util.tokenfile import workspace_token
from mam.web.auth import Logins
from mam.workspace import Workspace

TOKEN_FILE = "web-token"
DEFAULT_PORT = 8770
GRACE_S = 2  # open pages (their event streams) get this long to close on Ctrl-C
START_S = 30.0  # for the hosted server to be up (imports, on a loaded 2-core machine)

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Served:
    url: str  # where the page is
    login: str  # a login link: it works once, within LINK_TTL_S (mam.web.auth)
    token_source: str  # MAM_WEB_TOKEN or the token file's path (never the token)


def check_address(host: str, *, tls_cert: str | None, tls_key: str | None) -> None:
    """UsageError unless `host` may be served as asked (before anything is bound or written)."""
    if bool(tls_cert) != bool(tls_key):
        raise UsageError("--tls-cert and --tls-key go together: give both or neither")
    if not host or is_wildcard(host):
        raise UsageError(
            f"--host {host!r}: give the address browsers will use (the Host header is checked), not a wildcard"
        )
    if not is_loopback(host) and not tls_cert:
        raise UsageError(
            f"--host {host} is not loopback: serving beyond this machine needs TLS (--tls-cert FILE --tls-key FILE)"
        )


def web_token(ws: Workspace, settings: Settings) -> tuple[str, str]:
    """(token, where it came from): MAM_WEB_TOKEN, else `.mam/web-token` (0600, made on first use)."""
    return workspace_token(ws, given=settings.web_token, setting="MAM_WEB_TOKEN", file_name=TOKEN_FILE)


def bind(host: str, port: int) -> socket.socket:
    infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)
    family, kind, proto, _name, address = infos[0]
    sock = socket.socket(family, kind, proto)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind(address)
    except OSError as e:
        sock.close()
        raise UsageError(f"cannot serve on {authority(host, port)}: {e.strerror or e}") from e
    sock.listen(64)
    return sock  # not inheritable: no child of the node (a tmux server, a heartbeater) keeps the port


def serve(
    ws: Workspace,
    settings: Settings,
    *,
    host: str,
    port: int,
    tls_cert: str | None = None,
    tls_key: str | None = None,
    announce: Callable[[Served], None],
) -> None:
    """Serve the page on host:port (0: a free port) from this process until Ctrl-C (KeyboardInterrupt
    goes on up) or SIGTERM (returns): `mam web --foreground`, the same `Hosted` server as the node's."""
    check_address(host, tls_cert=tls_cert, tls_key=tls_key)
    token, source = web_token(ws, settings)
    hosted = Hosted(
        ws, settings, host=host, port=port, token=token, token_source=source, tls_cert=tls_cert, tls_key=tls_key
    )
    ended = threading.Event()
    previous = signal.signal(signal.SIGTERM, lambda *_: ended.set())
    try:
        announce(hosted.start())
        while hosted.alive() and not ended.wait(1.0):
            pass
    finally:
        hosted.stop()
        signal.signal(signal.SIGTERM, previous)


class Hosted:
    """The page served from a thread of a long-running process (the workspace's node) until `stop()`.

    The caller of `mam web` checked the address and read the token (its own MAM_WEB_TOKEN, else the
    token file) and hands them over; the address is checked again here, before anything is bound."""

    def __init__(
        self,
        ws: Workspace,
        settings: Settings,
        *,
        host: str,
        port: int,
        token: str,
        token_source: str,
        tls_cert: str | None = None,
        tls_key: str | None = None,
    ) -> None:
        check_address(host, tls_cert=tls_cert, tls_key=tls_key)
        self.ws, self.settings = ws, settings
        self.host, self.asked_port, self.token, self.token_source = host, port, token, token_source
        self.tls_cert, self.tls_key = tls_cert, tls_key
        self.port = 0
        self.since = 0.0
        self.logins: Logins | None = None
        self._server: Any = None
        self._thread: threading.Thread | None = None

    def start(self) -> Served:
        """Bind, build the app and serve it in a thread; the address it serves once it is up.
        UsageError: the address cannot be bound; MamError: the server did not come up."""
        import uvicorn

        from mam.web.app import build_app

        sock = bind(self.host, self.asked_port)
        self.port = sock.getsockname()[1]
        tls = bool(self.tls_cert)
        self.logins = Logins(self.token, self.port, secure=tls, ttl_s=self.settings.web_login_ttl_s)
        app, _live = build_app(self.ws, self.settings, logins=self.logins, host=self.host, port=self.port, tls=tls)
        config = uvicorn.Config(
            app,
            log_level="warning",
            access_log=False,  # an access line would hold the login link's token
            log_config=None,  # the process's own logging (the node's log; the command's stderr)
            lifespan="on",
            ssl_certfile=self.tls_cert,
            ssl_keyfile=self.tls_key,
            timeout_graceful_shutdown=GRACE_S,
            server_header=False,
        )
        self._server = uvicorn.Server(config)
        self._thread = threading.Thread(target=self._run, args=(sock,), name="mam-web", daemon=True)
        self._thread.start()
        until = time.monotonic() + START_S
        while not self._server.started:
            if not self._thread.is_alive() or time.monotonic() > until:
                self.stop()
                raise MamError(f"the page's server did not start on {authority(self.host, self.port)}")
            time.sleep(0.02)
        self.since = time.time()
        log.info("serving the page at %s", self.base())
        return self.served()

    def _run(self, sock: socket.socket) -> None:
        try:
            self._server.run(sockets=[sock])  # ends once stop() sets its should_exit
        except Exception:
            log.exception("the page's server failed")
        except SystemExit as e:  # uvicorn exits so when its app's start-up fails: the thread ends, and says why
            log.error("the page's server exited (%s)", e.code)
        finally:
            sock.close()
            if not self._server.should_exit:
                log.warning("the page's server at %s ended without being asked to", self.base())

    def base(self) -> str:
        return f"{'https' if self.tls_cert else 'http'}://{authority(self.host, self.port)}/"

    def served(self) -> Served:
        """Where the page is, with a new login link (its code works once, within LINK_TTL_S)."""
        assert self.logins is not None, "served() before start()"
        return Served(
            url=self.base(), login=f"{self.base()}login#code={self.logins.code()}", token_source=self.token_source
        )

    def logout_all(self) -> int:
        """End every login to the page (and every unused link); how many logins there were."""
        return self.logins.end_all() if self.logins is not None else 0

    def alive(self) -> bool:
        return self._thread is not None and self._thread.is_alive()

    def same(self, *, host: str, port: int, token: str, tls_cert: str | None, tls_key: str | None) -> bool:
        """Whether serving what is asked means serving this (port 0: any port)."""
        return (host, token, tls_cert, tls_key) == (self.host, self.token, self.tls_cert, self.tls_key) and port in (
            0,
            self.port,
        )

    def stop(self) -> None:
        """Stop serving: open pages get GRACE_S to close their event streams."""
        if self._server is not None:
            self._server.should_exit = True
        if self._thread is not None:
            self._thread.join(GRACE_S + 5)

    def status(self) -> dict[str, Any]:
        """For `mam node status --json`: where the page is (never its token)."""
        return {
            "url": self.base(),
            "host": self.host,
            "port": self.port,
            "tls": bool(self.tls_cert),
            "since": self.since,
            "token_source": self.token_source,
        }
