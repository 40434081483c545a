"""A routine's signed webhook: `POST http://127.0.0.1:PORT/routine/NAME`, served by the node on loopback.

A delivery fires one tick when all of these hold, else it is refused (HTTP 4xx), logged in the node's
log and recorded as a `refused` receipt of the routine (when the routine exists):

- `X-Mam-Timestamp`: the sender's clock in whole POSIX seconds, within MAX_SKEW_S of the node's;
- `X-Mam-Delivery`: an id (1-64 letters, digits, '.', '_', '-'), never seen before for this routine;
- `X-Mam-Signature: sha256=HEX`, HEX = HMAC-SHA256(the routine's secret, "TIMESTAMP.DELIVERY." + body);
- the body: at most MAX_BODY bytes, empty or a JSON object whose optional `text` (checked like a brief)
  is appended to the routine's brief.

The port is chosen free once and kept in the registry (`meta` row `routine_webhook_port`), so a
routine's URL stays the same across nodes; if another program took it, the node picks a new one,
records it and logs it (`mam routine list` shows the URL in use).
"""

from __future__ import annotations

import hashlib
import hmac
import json
import logging
import secrets
import socket
import threading
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from mam.errors import UsageError
from mam.ids import is_name
from mam.jobs.brief import check_brief
from mam.store import routines as table
from mam.store.registry import Registry

log = logging.getLogger(__name__)
MAX_SKEW_S = 300.0
MAX_BODY = 64 * 1024
PORT_KEY = "routine_webhook_port"
HOST = "127.0.0.1"
PATH_PREFIX = "/routine/"


def new_secret() -> str:
    return secrets.token_hex(32)


def signature(secret: str, timestamp: str, delivery: str, body: bytes) -> str:
    """The `X-Mam-Signature` value a sender puts on a delivery."""
    mac = hmac.new(secret.encode(), f"{timestamp}.{delivery}.".encode() + body, hashlib.sha256)
    return "sha256=" + mac.hexdigest()


@dataclass(frozen=True)
class Check:
    ok: bool
    reason: str = ""  # why it is refused: a word for the receipt
    text: str = ""  # the body's text, for the brief


def check(secret: str, headers: dict[str, str], body: bytes, *, now: float) -> Check:
    """Whether a delivery is signed with `secret`, fresh and well formed (its id is not looked up here)."""
    stamp, delivery, sig = (headers.get(h, "") for h in ("x-mam-timestamp", "x-mam-delivery", "x-mam-signature"))
    if not secret:
        return Check(False, "no_webhook")
    if not (stamp and delivery and sig):
        return Check(False, "unsigned")
    if not is_name(delivery):
        return Check(False, "bad_delivery_id")
    if not hmac.compare_digest(sig, signature(secret, stamp, delivery, body)):
        return Check(False, "bad_signature")
    if not stamp.isdigit() or abs(now - int(stamp)) > MAX_SKEW_S:
        return Check(False, "stale_timestamp")
    text = ""
    if body.strip():
        try:
            data = json.loads(body)
        except ValueError:
            return Check(False, "not_json")
        if not isinstance(data, dict) or not isinstance(data.get("text", ""), str):
            return Check(False, "not_json")
        text = data.get("text", "")
        if text:
            try:
                check_brief(text)
            except UsageError:
                return Check(False, "bad_text")
    return Check(True, text=text)


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((HOST, 0))
        return int(s.getsockname()[1])


def port_of(registry: Registry) -> int:
    """The recorded port (chosen and recorded now if none is)."""
    with registry.write() as conn:
        value = table.meta(conn, PORT_KEY)
        if value and value.isdigit():
            return int(value)
        port = free_port()
        table.set_meta(conn, PORT_KEY, str(port))
        return port


def url(port: int, name: str) -> str:
    return f"http://{HOST}:{port}{PATH_PREFIX}{name}"


class Endpoint:
    """The node's loopback HTTP endpoint for routine webhooks. `on_tick()` is called after a tick is recorded."""

    def __init__(self, registry: Registry, *, clock: Any, on_tick: Any) -> None:
        self.registry, self.clock, self.on_tick = registry, clock, on_tick
        self.server: ThreadingHTTPServer | None = None

    def start(self) -> int:
        port = port_of(self.registry)
        try:
            self.server = _Server((HOST, port), _Handler, self)
        except OSError as e:
            old, port = port, free_port()
            log.warning("routine webhooks: port %d is taken (%s); now on port %d", old, e, port)
            with self.registry.write() as conn:
                table.set_meta(conn, PORT_KEY, str(port))
            self.server = _Server((HOST, port), _Handler, self)
        threading.Thread(target=self.server.serve_forever, name="mam-routine-webhook", daemon=True).start()
        log.info("routine webhooks on %s", url(port, "NAME"))
        return port

    def stop(self) -> None:
        if self.server is not None:
            self.server.shutdown()
            self.server.server_close()

    def deliver(self, name: str, headers: dict[str, str], body: bytes) -> tuple[int, dict[str, Any]]:
        """(HTTP status, answer) for one delivery; a tick is recorded when it is accepted."""
        now = self.clock()
        if not is_name(name):
            return self._refused(None, name, "no_such_routine", 404)
        with self.registry.read() as conn:
            r = table.find(conn, name)
        if r is None:
            return self._refused(None, name, "no_such_routine", 404)
        verdict = check(r.secret, headers, body, now=now)
        if not verdict.ok:
            return self._refused(
                r.name, name, verdict.reason, 400 if verdict.reason in ("not_json", "bad_text") else 401
            )
        delivery = headers["x-mam-delivery"]
        with self.registry.write() as conn:
            if not table.take_delivery(conn, r.name, delivery, now=now):
                n = None
            else:
                digest = hashlib.sha256(delivery.encode()).hexdigest()[:16]
                key = f"routine:{r.name}:hook:{digest}"
                n = table.add_tick(
                    conn, routine=r.name, key=key, trigger="webhook", scheduled=now, now=now, text=verdict.text
                )
        if n is None:
            return self._refused(r.name, name, "replayed", 409)
        self.on_tick()
        return 202, {"accepted": True, "tick": n}

    def _refused(self, routine: str | None, name: str, reason: str, status: int) -> tuple[int, dict[str, Any]]:
        log.warning("routine webhook refused for %r: %s", name[:64], reason)
        if routine is not None:
            now = self.clock()
            with self.registry.write() as conn:
                table.add_tick(
                    conn,
                    routine=routine,
                    key=f"routine:{routine}:refused:{secrets.token_hex(8)}",
                    trigger="webhook",
                    scheduled=now,
                    now=now,
                    status=table.REFUSED,
                    reason=reason,
                    detail="a webhook delivery was refused",
                )
        return status, {"accepted": False, "reason": reason}


class _Server(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, address: tuple[str, int], handler: type[BaseHTTPRequestHandler], endpoint: Endpoint) -> None:
        self.endpoint = endpoint
        super().__init__(address, handler)


class _Handler(BaseHTTPRequestHandler):
    server: _Server
    timeout = 10.0

    def do_POST(self) -> None:  # noqa: N802 (http.server's name)
        if not self.path.startswith(PATH_PREFIX):
            return self._answer(404, {"accepted": False, "reason": "not_found"})
        try:
            length = int(self.headers.get("Content-Length", "0"))
        except ValueError:
            length = -1
        if not 0 <= length <= MAX_BODY:
            return self._answer(413, {"accepted": False, "reason": "body_too_large"})
        body = self.rfile.read(length)
        headers = {k.lower(): v for k, v in self.headers.items()}
        status, answer = self.server.endpoint.deliver(self.path[len(PATH_PREFIX) :], headers, body)
        return self._answer(status, answer)

    def _answer(self, status: int, answer: dict[str, Any]) -> None:
        data = (json.dumps(answer) + "\n").encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 (http.server's signature)
        log.debug("webhook: " + format, *args)
