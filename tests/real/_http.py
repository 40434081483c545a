"""The HTTP plumbing the scripted model servers share: a quiet handler that answers JSON or
server-sent events, and a threaded server on 127.0.0.1 (a port the OS picks) that records the
requests it answered. Each server (anthropic_server, openai_server, gemini_server) adds only its
wire format and its script. Standard library only.
"""

from __future__ import annotations

import json
import select
import socket
import sys
import threading
import time
from collections.abc import Callable, Iterable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Generic, Self, TypeVar

R = TypeVar("R")


def sse_event(name: str, data: dict[str, Any]) -> str:
    """One named server-sent event with a JSON payload."""
    return f"event: {name}\ndata: {json.dumps(data)}\n\n"


class QuietHandler(BaseHTTPRequestHandler):
    """HTTP/1.1, no access log (tests read the recorded requests instead)."""

    protocol_version = "HTTP/1.1"

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - the base class's name
        pass

    def _body(self) -> bytes:
        length = int(self.headers.get("Content-Length") or 0)
        return self.rfile.read(length) if length else b""

    def _json(self, status: int, payload: dict[str, Any]) -> None:
        data = json.dumps(payload).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def _sse(self, events: Iterable[str]) -> None:
        """Stream already formatted server-sent events, flushing each, then close the connection."""
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Cache-Control", "no-cache")
        self.send_header("Connection", "close")
        self.end_headers()
        self.close_connection = True
        for e in events:
            self.wfile.write(e.encode())
            self.wfile.flush()


class LoopbackServer(Generic[R]):
    """A threaded HTTP server on loopback: `start()`/`stop()` or `with`; `port`; `snapshot()`.

    A subclass gives `_handler_class()` (its handler reaches the owner through the class
    attribute `server_owner`) and records what it answered with `_record()`; with a `log_path`,
    each record is also appended there as the JSON line `_log_entry()` makes of it.
    """

    thread_name = "scripted-model"

    def __init__(self, *, log_path: str | None = None) -> None:
        self.log_path = log_path
        self.requests: list[R] = []
        self._lock = threading.Lock()
        self._httpd: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None
        self.hold: Hold | None = None  # a reply to hold back (tests/real/test_pause_real.py)

    def _handler_class(self) -> type[BaseHTTPRequestHandler]:
        raise NotImplementedError

    def start(self) -> Self:
        handler = type("Handler", (self._handler_class(),), {"server_owner": self})
        self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), handler)
        self._httpd.daemon_threads = True
        self._thread = threading.Thread(target=self._httpd.serve_forever, name=self.thread_name, daemon=True)
        self._thread.start()
        return self

    def hold_reply(self, when: Callable[[dict[str, Any]], bool]) -> Hold:
        """From now on, hold back the reply to the first request `when(body)` picks (see `Hold`)."""
        self.hold = Hold(when)
        return self.hold

    def _held(self, body: dict[str, Any], connection: socket.socket) -> bool | None:
        """None if this request is not held; else whether to answer it (released) or not (given up)."""
        hold = self.hold
        if hold is None or not hold.take(body):
            return None
        return hold.wait(connection)

    def stop(self) -> None:
        if self.hold is not None:
            self.hold.close()
        if self._httpd is not None:
            self._httpd.shutdown()
            self._httpd.server_close()
            self._httpd = None
        if self._thread is not None:
            self._thread.join(5)
            self._thread = None

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    @property
    def port(self) -> int:
        assert self._httpd is not None, "not started"
        return int(self._httpd.server_address[1])

    def snapshot(self) -> list[R]:
        with self._lock:
            return list(self.requests)

    def _log_entry(self, rec: R) -> dict[str, Any]:
        raise NotImplementedError

    def _record(self, rec: R) -> None:
        with self._lock:
            self.requests.append(rec)
            if self.log_path:
                with open(self.log_path, "a", encoding="utf-8") as f:
                    f.write(json.dumps(self._log_entry(rec)) + "\n")


def serve_until_interrupted(make: Callable[..., Any]) -> None:
    """A manual run (`python -m tests.real.<server> [LOG]`): start `make(log_path=LOG)`, print its
    base URL, serve until interrupted."""
    srv = make(log_path=sys.argv[1] if len(sys.argv) > 1 else None).start()
    print(srv.base_url, flush=True)
    try:
        while True:
            time.sleep(3600)
    except KeyboardInterrupt:
        srv.stop()


class Hold:
    """Hold back the reply to the first request `when(body)` picks, so the CLI's turn is in progress
    (waiting on its model) for as long as a test needs: `reached` is set once that request is held;
    the reply goes out on `release()`. It is never sent if the client gives the request up first
    (closes the connection: an interrupted turn) or the server stops (`close()`, which its `stop()`
    calls, so no handler thread outlives it). `outcome`: "", then "released", "abandoned" or "closed".
    """

    def __init__(self, when: Callable[[dict[str, Any]], bool]) -> None:
        self.when = when
        self.reached = threading.Event()
        self.outcome = ""
        self._go = threading.Event()
        self._closed = False
        self._armed = True
        self._lock = threading.Lock()

    def take(self, body: dict[str, Any]) -> bool:
        """Whether this request is the one to hold (only the first that matches is)."""
        with self._lock:
            if not self._armed or not self.when(body):
                return False
            self._armed = False
            return True

    def wait(self, connection: socket.socket) -> bool:
        """Block until released (True), or until the client leaves or the server closes (False)."""
        self.reached.set()
        while not self._go.wait(0.05):
            if client_gone(connection):
                self.outcome = "abandoned"
                return False
        self.outcome = self.outcome or ("closed" if self._closed else "released")
        return not self._closed

    def release(self) -> None:
        self._go.set()

    def close(self) -> None:
        self._closed = True
        self._go.set()


def client_gone(connection: socket.socket) -> bool:
    """The client closed (or reset) its end: the socket reads as ended, with nothing sent meanwhile."""
    try:
        readable, _w, _x = select.select([connection], [], [], 0)
        return bool(readable) and connection.recv(1, socket.MSG_PEEK) == b""
    except OSError:
        return True
