"""The HTTP plumbing the scripted model servers share: a quiet handler that answers JSON or
server-sent events, and a threaded server on 127.0.0.1 (a port the OS picks) that records the
requests it answered. Each server (anthropic_server, openai_server, gemini_server) adds only its
wire format and its script. Standard library only.
"""

from __future__ import annotations

import json
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

    def _handler_class(self) -> type[BaseHTTPRequestHandler]:
        raise NotImplementedError

    def start(self) -> Self:
        handler = type("Handler", (self._handler_class(),), {"server_owner": self})
        self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), handler)
        self._httpd.daemon_threads = True
        self._thread = threading.Thread(target=self._httpd.serve_forever, name=self.thread_name, daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
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
