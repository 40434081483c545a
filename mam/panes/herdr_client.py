"""herdr's socket protocol on the wire: newline-delimited JSON over a Unix socket, one request per connection.

A request is `{"id","method","params"}` on one line; the answer is one line, `{"id","result"}` or
`{"id","error":{"code","message"}}`. `ping` answers `{"type":"pong","version","protocol"}`; mam
talks only to the protocol numbers it knows (`SUPPORTED_PROTOCOLS`) and refuses any other.

This module owns the transport and the protocol check only: it knows no panes, tabs or workspaces,
and it never starts a server. Connecting to a socket that is not there creates nothing.
"""

from __future__ import annotations

import itertools
import json
import os
import socket
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from mam.errors import HerdrProtocolError, PaneError

# herdr release line for each protocol number mam was built against (ping's `protocol`).
SUPPORTED_PROTOCOLS: dict[int, str] = {20: "0.8.2", 22: "0.9.x"}
MAX_LINE = 64 * 1024 * 1024  # a reply larger than this is not a reply mam asked for
UNIX_PATH_MAX = 107  # sun_path is 108 bytes including the terminating NUL
_ids = itertools.count(1)


@dataclass(frozen=True)
class Pong:
    version: str
    protocol: int


def supported_text() -> str:
    return ", ".join(f"{p} (herdr {v})" for p, v in sorted(SUPPORTED_PROTOCOLS.items()))


class HerdrClient:
    """Requests to one herdr server socket; each call opens, asks, reads one line and closes."""

    def __init__(self, socket_path: Path, *, server: str = "", timeout: float = 10.0) -> None:
        self.socket_path = socket_path
        self.server = server or str(socket_path)
        self.timeout = timeout

    # -- liveness -------------------------------------------------------------------------------
    def answers(self) -> bool:
        """True if something listening on the socket answers `ping` at all; False if nothing is there."""
        if not self.socket_path.exists():
            return False  # never let a probe leave anything behind
        try:
            self.call("ping", timeout=min(self.timeout, 3.0))
        except PaneError as e:
            code = getattr(e, "code", "")
            if code in ("unreachable", "path_too_long"):
                return False
            if code in ("timeout", "connection"):
                raise
            # An error reply or an odd shape still means a server is there; its protocol is checked later.
        return True

    def ping(self) -> Pong:
        result = self.call("ping", timeout=min(self.timeout, 5.0))
        version, protocol = result.get("version"), result.get("protocol")
        if result.get("type") != "pong" or not isinstance(protocol, int) or isinstance(protocol, bool):
            raise HerdrProtocolError(
                f"herdr server {self.server!r} answered ping without a protocol number ({result!r}); "
                f"mam supports protocols {supported_text()}",
                server=self.server,
            )
        return Pong(version=str(version or "?"), protocol=protocol)

    def check_protocol(self) -> Pong:
        """Ping and refuse a protocol mam does not know, before any other request."""
        pong = self.ping()
        if pong.protocol not in SUPPORTED_PROTOCOLS:
            raise HerdrProtocolError(
                f"herdr server {self.server!r} is version {pong.version} speaking protocol {pong.protocol}; "
                f"mam supports protocols {supported_text()}. Install a supported herdr or use the tmux backend.",
                server=self.server,
                protocol=pong.protocol,
                version=pong.version,
            )
        return pong

    # -- one request ----------------------------------------------------------------------------
    def call(
        self, method: str, params: dict[str, Any] | None = None, *, timeout: float | None = None
    ) -> dict[str, Any]:
        """Send one request on its own connection and return its `result` object."""
        request_id = f"mam-{os.getpid()}-{next(_ids)}"
        line = json.dumps({"id": request_id, "method": method, "params": params or {}}, ensure_ascii=False)
        raw = self._exchange(method, line.encode("utf-8") + b"\n", self.timeout if timeout is None else timeout)
        try:
            reply = json.loads(raw)
        except ValueError as e:
            raise HerdrProtocolError(
                f"herdr {method} on {self.server!r}: the reply is not JSON: {raw[:200]!r}", server=self.server
            ) from e
        if not isinstance(reply, dict):
            raise HerdrProtocolError(
                f"herdr {method} on {self.server!r}: the reply is not an object: {raw[:200]!r}", server=self.server
            )
        error = reply.get("error")
        if isinstance(error, dict):
            # An error may carry an empty id (e.g. a request herdr could not parse), so errors are not id-checked.
            code, message = str(error.get("code", "error")), str(error.get("message", ""))
            raise PaneError(
                f"herdr {method} failed on {self.server!r}: [{code}] {message}",
                server=self.server,
                code=code,
                method=method,
            )
        result = reply.get("result")
        if reply.get("id") != request_id or not isinstance(result, dict):
            raise HerdrProtocolError(
                f"herdr {method} on {self.server!r}: unexpected reply shape {raw[:200]!r}", server=self.server
            )
        return result

    def _exchange(self, method: str, data: bytes, timeout: float) -> bytes:
        path = os.fsencode(self.socket_path)
        if len(path) > UNIX_PATH_MAX:
            raise PaneError(
                f"herdr socket path is too long for a Unix socket ({len(path)} bytes): {self.socket_path}; "
                "use a shorter HERDR_CONFIG_DIR or session name",
                server=self.server,
                code="path_too_long",
            )
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
            sock.settimeout(timeout)
            try:
                sock.connect(path)
            except (FileNotFoundError, ConnectionRefusedError) as e:
                raise PaneError(
                    f"herdr server {self.server!r} is not running ({e.strerror})",
                    server=self.server,
                    code="unreachable",
                ) from e
            except OSError as e:
                raise PaneError(
                    f"cannot reach herdr server {self.server!r}: {e}", server=self.server, code="unreachable"
                ) from e
            try:
                sock.sendall(data)
                return _read_line(sock)
            except TimeoutError as e:
                raise PaneError(
                    f"herdr {method} on {self.server!r} did not answer within {timeout:.0f}s",
                    server=self.server,
                    code="timeout",
                ) from e
            except OSError as e:
                raise PaneError(
                    f"herdr {method} on {self.server!r}: connection failed: {e}", server=self.server, code="connection"
                ) from e


def accepts_connections(path: Path) -> bool:
    """True if a process listens on the Unix socket `path` (connects without sending anything)."""
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
        sock.settimeout(2.0)
        try:
            sock.connect(os.fsencode(path))
        except OSError:
            return False
    return True


def _read_line(sock: socket.socket) -> bytes:
    chunks: list[bytes] = []
    size = 0
    while True:
        chunk = sock.recv(65536)
        if not chunk:
            if not chunks:
                raise ConnectionResetError("closed without a reply")
            break
        end = chunk.find(b"\n")
        if end >= 0:
            chunks.append(chunk[:end])
            break
        chunks.append(chunk)
        size += len(chunk)
        if size > MAX_LINE:
            raise HerdrProtocolError(f"herdr reply longer than {MAX_LINE} bytes")
    return b"".join(chunks)
