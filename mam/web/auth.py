"""Who may use the page: the Host it names, a login link that works once, a cookie and the page's per-login secret.

Browsers do not keep cookies apart by port: a cookie set for 127.0.0.1 goes to every port of that host,
another local user's server included. So a cookie alone opens nothing here. An ASGI middleware in front
of every route:
  - the `Host` header must name the served address (a DNS-rebinding page names its own): else 421;
  - the page's shell (`/`, `/login`, `/app.js`, `/app.css`: mam's own code, the same bytes for every
    visitor, no data and no secret) is served to anyone;
  - `POST /login` with a login code (`mam web` prints it in a link; it works once, for LINK_TTL_S) starts a
    login: a random cookie (HttpOnly, SameSite=Strict) and a random per-login secret in the answer's body,
    which the page keeps in `sessionStorage` (kept apart per origin, port included, unlike cookies);
  - every other route needs that login's cookie and its secret in `X-Mam-Login` (or, read-only,
    `Authorization: Bearer TOKEN`, for scripts): else 401 and no data. A change (not GET/HEAD) needs the
    login, and an `Origin`, when sent, that is the page's own: else 403;
  - a login ends after its TTL (MAM_WEB_LOGIN_TTL_S), with `mam web --logout-all`, or with the server.
Logins live in this process's memory only. Every credential is compared as bytes: a header of any bytes is
answered 400, 401 or 403, never an error.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import logging
import secrets
import threading
import time
from collections.abc import Awaitable, Callable, MutableMapping
from dataclasses import dataclass
from typing import Any

from mam.util.throttle import Throttle

Scope = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[MutableMapping[str, Any]]]
Send = Callable[[MutableMapping[str, Any]], Awaitable[None]]
SAFE_METHODS = ("GET", "HEAD")
PUBLIC = frozenset({"/", "/login", "/app.js", "/app.css"})  # the shell: no data, no secret
LOGIN_PATH = "/login"
SECRET_HEADER = b"x-mam-login"
LINK_TTL_S = 300.0  # a login link works once, within this long of being printed
MAX_LOGIN_BODY = 1024
KEPT = 1024  # codes and logins kept at most (the oldest go first)

log = logging.getLogger(__name__)
log.addFilter(Throttle())


def _digest(value: bytes) -> bytes:
    return hashlib.sha256(value).digest()


@dataclass(frozen=True)
class Login:
    secret: bytes  # what the page sends in X-Mam-Login
    expires: float


class Logins:
    """The page's login codes and logins, in this process's memory; codes and cookies are kept hashed."""

    def __init__(self, token: str, port: int, *, secure: bool, ttl_s: float, clock: Callable[[], float] = time.time):
        self.token = token.encode()
        self.cookie_name = f"mam_web_{port}".encode()  # one name per port: two pages of one host keep theirs apart
        self.secure, self.ttl_s, self.clock = secure, ttl_s, clock
        self._codes: dict[bytes, float] = {}  # sha256(code) -> until
        self._logins: dict[bytes, Login] = {}  # sha256(cookie) -> the login
        self._lock = threading.Lock()

    def code(self) -> str:
        """A new login code (for one login within LINK_TTL_S)."""
        code = secrets.token_urlsafe(32)
        with self._lock:
            self._prune()
            self._codes[_digest(code.encode())] = self.clock() + LINK_TTL_S
        return code

    def redeem(self, code: bytes) -> tuple[str, str] | None:
        """(cookie, secret) of a new login for a code not used before and not expired; None otherwise."""
        with self._lock:
            until = self._codes.pop(_digest(code), 0.0)
            if until < self.clock():
                return None
            cookie, secret = secrets.token_urlsafe(32), secrets.token_urlsafe(32)
            self._logins[_digest(cookie.encode())] = Login(secret.encode(), self.clock() + self.ttl_s)
            self._prune()
        return cookie, secret

    def find(self, cookie: bytes | None) -> Login | None:
        """The live login whose cookie this is."""
        if not cookie:
            return None
        with self._lock:
            login = self._logins.get(_digest(cookie))
        return login if login is not None and login.expires > self.clock() else None

    def end_all(self) -> int:
        """End every login and unused code; how many logins there were."""
        with self._lock:
            ended = sum(1 for login in self._logins.values() if login.expires > self.clock())
            self._logins.clear()
            self._codes.clear()
        return ended

    def _prune(self) -> None:
        """Forget expired codes and logins, and the oldest beyond KEPT (only `mam web` makes codes)."""
        now = self.clock()
        self._codes = {k: until for k, until in self._codes.items() if until >= now}
        self._logins = {k: login for k, login in self._logins.items() if login.expires >= now}
        for table in (self._codes, self._logins):
            while len(table) > KEPT:
                del table[next(iter(table))]

    def bearer_ok(self, header: bytes) -> bool:
        return hmac.compare_digest(header, b"Bearer " + self.token)

    def set_cookie(self, cookie: str) -> bytes:
        parts = [
            f"{self.cookie_name.decode()}={cookie}",
            "Path=/",
            f"Max-Age={int(self.ttl_s)}",
            "HttpOnly",
            "SameSite=Strict",
        ]
        if self.secure:
            parts.append("Secure")
        return "; ".join(parts).encode()

    def cookie_of(self, header: bytes) -> bytes | None:
        """This page's cookie in a `Cookie` header, as bytes (no decoding: any bytes may come)."""
        for part in header.split(b";"):
            name, eq, value = part.strip().partition(b"=")
            if eq and name == self.cookie_name:
                return value.strip().strip(b'"')
        return None


def _headers(scope: Scope) -> dict[bytes, bytes]:
    return {k.lower(): v for k, v in scope.get("headers") or []}


async def _reply(send: Send, status: int, body: dict[str, Any], extra: list[tuple[bytes, bytes]] = ()) -> None:  # type: ignore[assignment]
    data = json.dumps(body).encode()
    await send(
        {
            "type": "http.response.start",
            "status": status,
            "headers": [
                (b"content-type", b"application/json"),
                (b"content-length", str(len(data)).encode()),
                (b"cache-control", b"no-store"),
                *extra,
            ],
        }
    )
    await send({"type": "http.response.body", "body": data})


UNAUTHORIZED = {
    "error": "unauthorized: this tab has no live login; open a new link (`mam web` prints one)",
}


class Guard:
    def __init__(self, app: Any, logins: Logins, hosts: frozenset[str], scheme: str) -> None:
        self.app, self.logins, self.hosts = app, logins, hosts
        self.origins = frozenset(f"{scheme}://{h}".encode() for h in hosts)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            if scope["type"] == "websocket":
                await send({"type": "websocket.close", "code": 1008})
                return
            await self.app(scope, receive, send)  # the lifespan
            return
        try:
            await self._guard(scope, receive, send)
        except Exception as e:  # never a traceback per request: one throttled line, and a 400
            log.warning("mam web: refused a request it could not read: %s", type(e).__name__)
            await _reply(send, 400, {"error": "bad request"})

    async def _guard(self, scope: Scope, receive: Receive, send: Send) -> None:
        headers = _headers(scope)
        if headers.get(b"host", b"").lower().decode("latin-1") not in self.hosts:
            await _reply(send, 421, {"error": "this server does not serve that host name"})
            return
        method, path = scope["method"], scope["path"]
        origin = headers.get(b"origin")
        foreign = origin is not None and origin not in self.origins
        if path == LOGIN_PATH and method == "POST":
            await self._login(receive, send, foreign)
            return
        if path in PUBLIC and method in SAFE_METHODS:
            await self.app(scope, receive, send)
            return
        login = self.logins.find(self.logins.cookie_of(headers.get(b"cookie", b"")))
        by_login = login is not None and hmac.compare_digest(headers.get(SECRET_HEADER, b""), login.secret)
        by_bearer = method in SAFE_METHODS and self.logins.bearer_ok(headers.get(b"authorization", b""))
        if not (by_login or by_bearer):
            await _reply(send, 401, UNAUTHORIZED, [(b"www-authenticate", b'Bearer realm="mam web"')])
            return
        if method not in SAFE_METHODS and foreign:
            await _reply(send, 403, {"error": "forbidden: a change comes from the page's own origin"})
            return
        await self.app(scope, receive, send)

    async def _login(self, receive: Receive, send: Send, foreign: bool) -> None:
        body = b""
        while True:
            message = await receive()
            body += message.get("body", b"")
            if len(body) > MAX_LOGIN_BODY or not message.get("more_body"):
                break
        try:
            code = json.loads(body)["code"].encode("ascii") if len(body) <= MAX_LOGIN_BODY else b""
        except (ValueError, KeyError, TypeError, AttributeError, UnicodeEncodeError):
            code = b""
        made = None if foreign or not code else self.logins.redeem(code)
        if made is None:
            await _reply(
                send, 401, {"error": "this login link was used already or has expired: `mam web` prints a new one"}
            )
            return
        cookie, secret = made
        await _reply(
            send,
            200,
            {"secret": secret, "expires_in_s": self.logins.ttl_s},
            [(b"set-cookie", self.logins.set_cookie(cookie)), (b"referrer-policy", b"no-referrer")],
        )
