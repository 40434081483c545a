"""A TCP link to a broker that a test cuts, as a network fault does: `cut()` resets every connection through it and
refuses new ones until `join()`. What a broker sends a QoS 0 subscriber while it is cut off is lost for good."""

from __future__ import annotations

import contextlib
import socket
import struct
import threading


def _reset(sock: socket.socket) -> None:
    """Close with a RST, as a dropped link looks to the other end."""
    with contextlib.suppress(OSError):  # already closed by its pipe
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    sock.close()


class CutLink:
    def __init__(self, host: str, port: int) -> None:
        self.target = (host, port)
        self._server = socket.create_server(("127.0.0.1", 0))
        self.host, self.port = "127.0.0.1", self._server.getsockname()[1]
        self._joined = threading.Event()
        self._joined.set()
        self._lock = threading.Lock()
        self._pairs: list[tuple[socket.socket, socket.socket]] = []
        threading.Thread(target=self._accept, daemon=True).start()

    def env(self) -> dict[str, str]:
        return {"MQTT_BROKER": self.host, "MQTT_PORT": str(self.port)}

    def _accept(self) -> None:
        while True:
            try:
                conn, _ = self._server.accept()
            except OSError:
                return  # closed
            if not self._joined.is_set():
                _reset(conn)
                continue
            try:
                up = socket.create_connection(self.target, timeout=5)
            except OSError:
                _reset(conn)
                continue
            with self._lock:
                self._pairs.append((conn, up))
            for a, b in ((conn, up), (up, conn)):
                threading.Thread(target=self._pipe, args=(a, b), daemon=True).start()

    @staticmethod
    def _pipe(a: socket.socket, b: socket.socket) -> None:
        with contextlib.suppress(OSError):  # either end reset (a cut) or closed: the pipe ends
            while data := a.recv(65536):
                b.sendall(data)
        for s in (a, b):
            with contextlib.suppress(OSError):
                s.shutdown(socket.SHUT_RDWR)

    def cut(self) -> None:
        self._joined.clear()
        with self._lock:
            pairs, self._pairs = self._pairs, []
        for a, b in pairs:
            _reset(a)
            _reset(b)

    def join(self) -> None:
        self._joined.set()

    def close(self) -> None:
        self._server.close()
        self.cut()
