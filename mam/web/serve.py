"""Serving the page in the foreground until Ctrl-C: the address checks, the token, the socket, uvicorn.

The checks come first and refuse before anything is bound or written: a non-loopback address
needs TLS (a cookie and a token must not cross a network in clear), and the address must be one a
browser names (the Host header is checked), so a wildcard such as 0.0.0.0 is refused.
"""

from __future__ import annotations

import socket
from collections.abc import Callable
from dataclasses import dataclass
from urllib.parse import quote

from mam.errors import UsageError
from mam.settings import Settings
from mam.util.hosts import authority, is_loopback, is_wildcard
from mam.util.tokenfile import workspace_token
from mam.workspace import Workspace

TOKEN_FILE = "web-token"
DEFAULT_PORT = 8770
GRACE_S = 2  # open pages (their event streams) get this long to close on Ctrl-C


@dataclass(frozen=True)
class Served:
    url: str  # where the page is
    login: str  # the one-time link: it sets the cookie, then redirects to `url`
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
    sock.set_inheritable(True)
    return sock


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
    """Serve the page on host:port (0: a free port) until Ctrl-C or SIGTERM."""
    import uvicorn

    from mam.web.app import build_app

    check_address(host, tls_cert=tls_cert, tls_key=tls_key)
    token, source = web_token(ws, settings)
    sock = bind(host, port)
    port = sock.getsockname()[1]
    tls = bool(tls_cert)
    app, _live = build_app(ws, settings, token=token, host=host, port=port, tls=tls)
    config = uvicorn.Config(
        app,
        log_level="warning",
        access_log=False,  # an access line would hold the login link's token
        lifespan="on",
        ssl_certfile=tls_cert,
        ssl_keyfile=tls_key,
        timeout_graceful_shutdown=GRACE_S,
        server_header=False,
    )
    base = f"{'https' if tls else 'http'}://{authority(host, port)}"
    announce(Served(url=f"{base}/", login=f"{base}/login?token={quote(token, safe='')}", token_source=source))
    uvicorn.Server(config).run(sockets=[sock])
