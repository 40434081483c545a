"""A caller's standard streams inside the node.

The node serves each request in a thread; `sys.stdin`, `sys.stdout` and `sys.stderr` are `Routed`
there: each write goes to the streams of the caller the current thread serves (mam.util.caller),
else to the node's own (its log). A caller's stream is a `Stream` over the descriptor it passed,
which the node mutes once the caller has gone (interrupted, or killed): the command runs on, its
output dropped, and no write to a closed pipe ends it.
"""

from __future__ import annotations

import io
import os
import sys
import threading
from typing import Any, TextIO

from mam.util import caller


class Stream:
    """One caller's stream over the descriptor it passed (the node owns and closes it)."""

    def __init__(self, fd: int, mode: str) -> None:
        self.fd = fd
        self._lock = threading.Lock()
        self._tty = os.isatty(fd)
        # As the interpreter opens its own standard streams: UTF-8, no newline translation (a brief's
        # `\r\n` stays), undecodable bytes kept as surrogates and written back as they came.
        self._file: Any = open(  # noqa: SIM115  # closed by close() or _drop()
            fd, mode, encoding="utf-8", errors="surrogateescape", newline="\n", buffering=1, closefd=True
        )
        self.encoding, self.errors = "utf-8", "surrogateescape"

    def write(self, text: str) -> int:
        with self._lock:
            try:
                self._file.write(text)
            except (OSError, ValueError):
                self._drop()
        return len(text)

    def flush(self) -> None:
        with self._lock:
            try:
                self._file.flush()
            except (OSError, ValueError):
                self._drop()

    def read(self, size: int = -1) -> str:
        return str(self._file.read(size))

    def readline(self, size: int = -1) -> str:
        return str(self._file.readline(size))

    def isatty(self) -> bool:
        return self._tty

    def fileno(self) -> int:
        return self.fd

    def mute(self) -> None:
        """The caller has gone: drop whatever the command writes from now on."""
        with self._lock:
            self._drop()

    def close(self) -> None:
        with self._lock:
            self._drop()

    def _drop(self) -> None:
        old, self._file, self._tty = self._file, _Gone(), False
        try:
            old.close()
        except (OSError, ValueError):
            pass


class _Gone(io.StringIO):
    """What a muted stream writes to: nothing is kept, and only text is taken, as by the stream it replaces. A
    sink that took bytes made the node's `sys.stderr` look binary to click (it probes with a write of b"" once
    and caches what it found for the process), and every later echo, for any caller, then failed."""

    def write(self, text: str) -> int:
        if not isinstance(text, str):
            raise TypeError(f"write() argument must be str, not {type(text).__name__}")
        return len(text)


class Routed:
    """`sys.stdout` (stdin, stderr) in the node: the served caller's stream, else the node's own."""

    def __init__(self, name: str, own: TextIO) -> None:
        self._name = name
        self._own = own

    def target(self) -> Any:
        served = caller.served_streams()
        stream = getattr(served, self._name, None) if served is not None else None
        return self._own if stream is None else stream

    def write(self, text: str) -> int:
        return int(self.target().write(text))

    def flush(self) -> None:
        self.target().flush()

    def isatty(self) -> bool:
        return bool(self.target().isatty())

    def fileno(self) -> int:
        return int(self.target().fileno())

    def __getattr__(self, attr: str) -> Any:
        return getattr(self.target(), attr)


def install() -> None:
    """Route this process's standard streams (the node, once, at its start)."""
    for name in ("stdin", "stdout", "stderr"):
        current = getattr(sys, name)
        if not isinstance(current, Routed):
            setattr(sys, name, Routed(name, current))
