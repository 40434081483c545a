"""A minimal WebSocket client (RFC 6455) over a unix socket: what codex's app-server speaks on
`--listen unix://PATH` (mam.agents.codex_server).

Only what that needs: the opening handshake (its accept key checked), masked text frames out,
text frames in (fragmented ones joined), pings answered, a close frame ends the connection.
No extensions, no subprotocols, no TLS: the socket is a 0600 file of this user's, never a network.
`websockets` is not one of mam's dependencies (it comes only through amqtt), and this is small.
"""

from __future__ import annotations

import base64
import contextlib
import hashlib
import os
import socket
import struct

GUID = b"258EAFA5-E914-47DA-95CA-C5AB0DC85B11"
MAX_MESSAGE = 64 * 1024 * 1024  # a thread read back with every turn can be large; more is refused
_TEXT, _BINARY, _CLOSE, _PING, _PONG, _CONT = 0x1, 0x2, 0x8, 0x9, 0xA, 0x0


class HandshakeError(OSError):
    """The peer is not a WebSocket server: nothing was sent to it beyond the handshake."""


class Closed(OSError):
    """The peer closed the connection (a close frame, or the socket's end)."""


def accept_key(key: str) -> str:
    return base64.b64encode(hashlib.sha1(key.encode("ascii") + GUID).digest()).decode("ascii")


def frame(opcode: int, payload: bytes, *, mask: bytes | None = None) -> bytes:
    """One final frame, masked (a client's frames always are) with `mask` or a random key."""
    key = os.urandom(4) if mask is None else mask
    n = len(payload)
    if n < 126:
        head = struct.pack("!BB", 0x80 | opcode, 0x80 | n)
    elif n < 1 << 16:
        head = struct.pack("!BBH", 0x80 | opcode, 0x80 | 126, n)
    else:
        head = struct.pack("!BBQ", 0x80 | opcode, 0x80 | 127, n)
    return head + key + _masked(payload, key)


def _masked(payload: bytes, key: bytes) -> bytes:
    if not payload:
        return b""
    whole = (key * (len(payload) // 4 + 1))[: len(payload)]
    return (int.from_bytes(payload, "big") ^ int.from_bytes(whole, "big")).to_bytes(len(payload), "big")


class Client:
    """One connection. `timeout` bounds each blocking step (connect, each read, each write)."""

    def __init__(self, path: str, *, timeout: float) -> None:
        self._sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self._sock.settimeout(timeout)
        self._buf = b""
        try:
            self._sock.connect(path)
            self._handshake()
        except BaseException:
            self.close()
            raise

    def _handshake(self) -> None:
        key = base64.b64encode(os.urandom(16)).decode("ascii")
        self._sock.sendall(
            (
                "GET / HTTP/1.1\r\nHost: localhost\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
                f"Sec-WebSocket-Key: {key}\r\nSec-WebSocket-Version: 13\r\n\r\n"
            ).encode("ascii")
        )
        while b"\r\n\r\n" not in self._buf:
            if len(self._buf) > 16384:
                raise HandshakeError("no end to the handshake's answer")
            self._fill()
        head, self._buf = self._buf.split(b"\r\n\r\n", 1)
        lines = head.decode("latin-1").split("\r\n")
        fields = {k.strip().lower(): v.strip() for k, _, v in (line.partition(":") for line in lines[1:])}
        if lines[0].split(" ")[1:2] != ["101"]:
            raise HandshakeError(f"not a WebSocket server: {lines[0]!r}")
        if fields.get("sec-websocket-accept") != accept_key(key):
            raise HandshakeError("the server's Sec-WebSocket-Accept does not match the key")

    def _fill(self) -> None:
        chunk = self._sock.recv(65536)
        if not chunk:
            raise Closed("the server closed the connection")
        self._buf += chunk

    def _take(self, n: int) -> bytes:
        while len(self._buf) < n:
            self._fill()
        out, self._buf = self._buf[:n], self._buf[n:]
        return out

    def send_text(self, text: str) -> None:
        self._sock.sendall(frame(_TEXT, text.encode("utf-8")))

    def recv_text(self) -> str:
        """The next text (or binary, read as UTF-8) message; pings are answered on the way."""
        parts: list[bytes] = []
        while True:
            b0, b1 = self._take(2)
            opcode, n = b0 & 0x0F, b1 & 0x7F
            if n == 126:
                (n,) = struct.unpack("!H", self._take(2))
            elif n == 127:
                (n,) = struct.unpack("!Q", self._take(8))
            if n + sum(map(len, parts)) > MAX_MESSAGE:
                raise Closed(f"a message over {MAX_MESSAGE} bytes")
            key = self._take(4) if b1 & 0x80 else b""
            payload = self._take(n)
            if key:
                payload = _masked(payload, key)
            if opcode == _PING:
                self._sock.sendall(frame(_PONG, payload))
            elif opcode == _CLOSE:
                raise Closed("the server sent a close frame")
            elif opcode in (_TEXT, _BINARY, _CONT):
                parts.append(payload)
                if b0 & 0x80:
                    return b"".join(parts).decode("utf-8")

    def close(self) -> None:
        with contextlib.suppress(OSError):
            self._sock.sendall(frame(_CLOSE, struct.pack("!H", 1000)))
        with contextlib.suppress(OSError):
            self._sock.close()
