"""A routine's signed webhook: `POST http://127.0.0.1:PORT/routine/NAME`, served by the node on loopback.

A delivery fires one tick when all of these hold, else it is refused (HTTP 4xx) and counted:

- `X-Mam-Timestamp`: the sender's clock in whole POSIX seconds, within MAX_SKEW_S of the node's;
- `X-Mam-Delivery`: an id (1-64 letters, digits, '.', '_', '-'), never seen before for this routine;
- `X-Mam-Signature: sha256=HEX`, HEX = HMAC-SHA256(the routine's secret, "TIMESTAMP.DELIVERY." + body);
- the body: at most MAX_BODY bytes, empty or a JSON object whose optional `text` (checked like a brief)
  is appended to the routine's brief.

Before its signature checks, a delivery learns nothing: a routine that does not exist, one without a
webhook, an unsigned delivery and a forged one all get the same 401 `unauthorized` (the routine's
secret or a decoy is checked alike). Refusals are counted, not stored one by one: a routine's first
refusal after a quiet minute is a `refused` receipt at once, and those that follow within the minute
are summed into one receipt (and one log line) when it ends. Refused receipts are pruned among
themselves (KEEP_REFUSED), so no flood of refusals evicts the receipt of a tick that fired.

The port is chosen free once and kept in the registry (`meta` row `routine_webhook_port`), so a
routine's URL stays the same across nodes. If another program holds it when the node starts, the node
does not move: it records why the webhook is down (`meta` row `routine_webhook_down`, shown by `mam
routine list`, `mam status` and `mam doctor`), logs it, and tries the port again every RETRY_S.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import logging
import secrets
import socket
import threading
import time
from collections import Counter
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from mam.errors import UsageError
from mam.ids import is_name
from mam.jobs.brief import check_brief
from mam.routines.health import DOWN_KEY, down
from mam.store import routines as table
from mam.store.registry import Registry
from mam.util.throttle import Throttle

log = logging.getLogger(__name__)
failed = logging.getLogger(f"{__name__}.failed")  # what anyone may cause per request: a throttled line
failed.addFilter(Throttle())
MAX_SKEW_S = 300.0
MAX_BODY = 64 * 1024
PORT_KEY = "routine_webhook_port"
HOST = "127.0.0.1"
PATH_PREFIX = "/routine/"
RETRY_S = 5.0  # a node whose port is taken tries it again this often
SUMMARY_S = 60.0  # refusals of one routine after its first are summed into one receipt per this long
UNAUTHORIZED = "unauthorized"  # the one answer before a delivery's signature checks
BEFORE_SIGNATURE = frozenset({"no_such_routine", "no_webhook", "unsigned", "bad_delivery_id", "bad_signature"})


def new_secret() -> str:
    return secrets.token_hex(32)


def signature(secret: str, timestamp: str, delivery: str, body: bytes) -> str:
    """The `X-Mam-Signature` value a sender puts on a delivery."""
    mac = hmac.new(secret.encode(), f"{timestamp}.{delivery}.".encode("utf-8", "replace") + body, hashlib.sha256)
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
    # As bytes: a header holds any characters, and compare_digest refuses non-ASCII text with an error.
    if not hmac.compare_digest(sig.encode("utf-8", "replace"), signature(secret, stamp, delivery, body).encode()):
        return Check(False, "bad_signature")
    if not (stamp.isascii() and stamp.isdigit()) or abs(now - int(stamp)) > MAX_SKEW_S:
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
        self.port = 0
        self._next_try = 0.0
        self._decoy = new_secret()  # checked for a routine that has no secret, so every refusal costs the same
        self._lock = threading.Lock()
        self._serving = threading.Lock()  # start and close: the routines thread's, and the ending node's
        self._closed = False
        self._counted: dict[str, Counter[str]] = {}  # routine ("" for none) -> reasons counted, not yet written
        self._since: dict[str, float] = {}
        self._written: dict[str, float] = {}

    def start(self) -> bool:
        """Serve the recorded port (chosen and recorded now if none is); False, with why recorded and logged,
        when it cannot be bound: the URL senders were given is never moved to another port."""
        self._next_try = time.monotonic() + RETRY_S
        self.port = port_of(self.registry)
        try:
            self.server = _Server((HOST, self.port), _Handler, self)
        except OSError as e:
            held = e.strerror or str(e)
            why = f"{HOST}:{self.port} is held by another program ({held}); the node tries it every {RETRY_S:.0f} s"
            was = down(self.registry)
            if was is None or was.get("why") != why:
                log.warning("routine webhooks are down: %s", why)
                with self.registry.write() as conn:
                    table.set_meta(conn, DOWN_KEY, json.dumps({"port": self.port, "since": time.time(), "why": why}))
            return False
        if down(self.registry) is not None:
            with self.registry.write() as conn:
                table.delete_meta(conn, DOWN_KEY)
        threading.Thread(target=self.server.serve_forever, name="mam-routine-webhook", daemon=True).start()
        log.info("routine webhooks on %s", url(self.port, "NAME"))
        return True

    def keep_serving(self) -> None:
        """Called every scheduler step while any routine has a webhook: try the port again when it was taken;
        write the refusal summaries that are due."""
        with self._serving:
            if self.server is None and not self._closed and time.monotonic() >= self._next_try:
                self.start()
        self.flush()

    def close(self) -> None:
        """Stop listening for good, from any thread: the node on its way out closes the port before it removes
        its socket, whatever the routines thread is doing (a routine's job may be running in it)."""
        with self._serving:
            self._closed = True
            server, self.server = self.server, None
        if server is not None:
            server.shutdown()
            server.server_close()

    def stop(self) -> None:
        """Close, then write the refusal summaries still due (the routines thread, at its end)."""
        self.close()
        self.flush(force=True)

    def deliver(self, name: str, headers: dict[str, str], body: bytes) -> tuple[int, dict[str, Any]]:
        """(HTTP status, answer) for one delivery; a tick is recorded when it is accepted."""
        now = self.clock()
        r = None
        if is_name(name):
            with self.registry.read() as conn:
                r = table.find(conn, name)
        verdict = check(r.secret if r is not None and r.secret else self._decoy, headers, body, now=now)
        if r is None or not r.secret:
            return self._refused(None, "no_such_routine" if r is None else "no_webhook", 401)
        if not verdict.ok:
            return self._refused(r.name, verdict.reason, 400 if verdict.reason in ("not_json", "bad_text") else 401)
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
            return self._refused(r.name, "replayed", 409)
        self.on_tick()
        return 202, {"accepted": True, "tick": n}

    def _refused(self, routine: str | None, reason: str, status: int) -> tuple[int, dict[str, Any]]:
        """Count a refusal (written by `flush`); the answer says nothing before the signature checked."""
        key = routine or ""
        with self._lock:
            if key not in self._counted and len(self._counted) < 1024:
                self._counted[key], self._since[key] = Counter(), self.clock()
            if key in self._counted:
                self._counted[key][reason] += 1
        self.flush()
        if reason in BEFORE_SIGNATURE:
            return 401, {"accepted": False, "reason": UNAUTHORIZED}
        return status, {"accepted": False, "reason": reason}

    def flush(self, *, force: bool = False) -> None:
        """Write the refusals counted: a routine's first after a quiet SUMMARY_S at once, the rest summed
        when their SUMMARY_S ends; one receipt and one log line each (routines that do not exist: a line)."""
        now = self.clock()
        with self._lock:
            due = [k for k in self._counted if force or now - self._written.get(k, now - SUMMARY_S) >= SUMMARY_S]
            taken = [(k, self._counted.pop(k), self._since.pop(k)) for k in due]
            for k in due:
                self._written[k] = now
        for routine, reasons, since in taken:
            count = sum(reasons.values())
            said = ", ".join(f"{reason} {n}" for reason, n in reasons.most_common())
            detail = f"{count} webhook deliveries refused ({said})" if count > 1 else "a webhook delivery was refused"
            if not routine:
                log.warning("routine webhook: deliveries refused for no routine with a webhook: %d (%s)", count, said)
                continue
            log.warning("routine webhook: deliveries refused for %r: %d (%s)", routine, count, said)
            with self.registry.write() as conn:
                if table.find(conn, routine) is None:
                    continue
                table.add_tick(
                    conn,
                    routine=routine,
                    key=f"routine:{routine}:refused:{secrets.token_hex(8)}",
                    trigger="webhook",
                    scheduled=since,
                    now=now,
                    status=table.REFUSED,
                    reason=reasons.most_common(1)[0][0],
                    detail=detail,
                )


class _Server(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, address: tuple[str, int], handler: type[BaseHTTPRequestHandler], endpoint: Endpoint) -> None:
        self.endpoint = endpoint
        super().__init__(address, handler)

    def handle_error(self, request: Any, _client_address: Any) -> None:
        failed.warning("routine webhook: a request failed")  # never a traceback per request


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
