"""Who may use the page: the Host it names, a bearer token given once as a link, a cookie, a CSRF token.

An ASGI middleware in front of every route:
  - the `Host` header must name the served address (a DNS-rebinding page names its own): else 421;
  - `GET /login?token=T` (or `/?token=T`) with the right token sets an HttpOnly, SameSite=Strict
    cookie and redirects to `/`, so the token leaves the address bar and the history;
  - anything else needs that cookie (or `Authorization: Bearer T`, for scripts): else 401, no data;
  - a request that changes something (not GET/HEAD) needs the cookie and the CSRF token of the
    page (header `X-CSRF-Token`), and an `Origin`, when sent, that is the page's own: else 403.
The cookie and the CSRF token are HMACs of the token, so neither reveals it and both outlive a
restart; the token itself is never in a page, an event or a log.
"""

from __future__ import annotations

import hashlib
import hmac
import json
from collections.abc import Awaitable, Callable, MutableMapping
from http.cookies import SimpleCookie
from typing import Any
from urllib.parse import parse_qs

Scope = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[MutableMapping[str, Any]]]
Send = Callable[[MutableMapping[str, Any]], Awaitable[None]]
SAFE_METHODS = ("GET", "HEAD")
LOGIN_PATHS = ("/login", "/")


class Keys:
    """The cookie's name and value and the CSRF token, all derived from the bearer token."""

    def __init__(self, token: str, port: int, *, secure: bool) -> None:
        self.token = token.encode()
        self.cookie_name = f"mam_web_{port}"  # cookies ignore the port: two servers on one host keep theirs apart
        self.cookie_value = self._mac(b"mam-web-cookie")
        self.csrf = self._mac(b"mam-web-csrf")
        self.secure = secure

    def _mac(self, what: bytes) -> str:
        return hmac.new(self.token, what, hashlib.sha256).hexdigest()

    def token_ok(self, given: str) -> bool:
        return hmac.compare_digest(given.encode(), self.token)

    def set_cookie(self) -> bytes:
        parts = [f"{self.cookie_name}={self.cookie_value}", "Path=/", "HttpOnly", "SameSite=Strict"]
        if self.secure:
            parts.append("Secure")
        return "; ".join(parts).encode()


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


class Guard:
    def __init__(self, app: Any, keys: Keys, hosts: frozenset[str], scheme: str) -> None:
        self.app, self.keys, self.hosts = app, keys, hosts
        self.origins = frozenset(f"{scheme}://{h}" for h in hosts)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            if scope["type"] == "websocket":
                await send({"type": "websocket.close", "code": 1008})
                return
            await self.app(scope, receive, send)  # the lifespan
            return
        headers = _headers(scope)
        if headers.get(b"host", b"").decode("latin-1").lower() not in self.hosts:
            await _reply(send, 421, {"error": "this server does not serve that host name"})
            return
        method, path = scope["method"], scope["path"]
        query = parse_qs(scope.get("query_string", b"").decode("latin-1"))
        if path in LOGIN_PATHS and "token" in query:
            if method not in SAFE_METHODS or not self.keys.token_ok(query["token"][0]):
                await _reply(send, 401, {"error": "unauthorized: open the link `mam web` printed"})
                return
            await send(
                {
                    "type": "http.response.start",
                    "status": 303,
                    "headers": [
                        (b"location", b"/"),
                        (b"set-cookie", self.keys.set_cookie()),
                        (b"cache-control", b"no-store"),
                        (b"referrer-policy", b"no-referrer"),
                        (b"content-length", b"0"),
                    ],
                }
            )
            await send({"type": "http.response.body", "body": b""})
            return
        by_cookie = self._cookie_ok(headers)
        by_bearer = hmac.compare_digest(headers.get(b"authorization", b""), b"Bearer " + self.keys.token)
        if not (by_cookie or by_bearer):
            await _reply(
                send,
                401,
                {"error": "unauthorized: open the link `mam web` printed (or send Authorization: Bearer <token>)"},
                [(b"www-authenticate", b'Bearer realm="mam web"')],
            )
            return
        if method not in SAFE_METHODS:
            origin = headers.get(b"origin")
            csrf = headers.get(b"x-csrf-token", b"").decode("latin-1")
            foreign = origin is not None and origin.decode("latin-1") not in self.origins
            if not by_cookie or not hmac.compare_digest(csrf, self.keys.csrf) or foreign:
                await _reply(send, 403, {"error": "forbidden: a change needs the page's cookie and its CSRF token"})
                return
        await self.app(scope, receive, send)

    def _cookie_ok(self, headers: dict[bytes, bytes]) -> bool:
        raw = headers.get(b"cookie", b"").decode("latin-1")
        if not raw:
            return False
        jar: SimpleCookie = SimpleCookie()
        try:
            jar.load(raw)
        except Exception:
            return False
        morsel = jar.get(self.keys.cookie_name)
        return morsel is not None and hmac.compare_digest(morsel.value, self.keys.cookie_value)
