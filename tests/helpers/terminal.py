"""A pseudo-terminal for tests of what a command draws on a terminal: its size set, and everything written
to it read by a thread into `Terminal.seen` (the bytes so far, `text()`) until every writer has closed it."""

from __future__ import annotations

import fcntl
import os
import pty
import struct
import termios
import threading


class Terminal:
    """`slave`: the fd to hand to the command (close it here once the command has it: `handed()`)."""

    def __init__(self, rows: int = 50, columns: int = 200) -> None:
        self.master, self.slave = pty.openpty()
        fcntl.ioctl(self.slave, termios.TIOCSWINSZ, struct.pack("HHHH", rows, columns, 0, 0))
        self.chunks: list[bytes] = []
        self._reader = threading.Thread(target=self._drain, daemon=True)

    def handed(self) -> None:
        """The command holds the slave end now: close ours and start reading."""
        os.close(self.slave)
        self._reader.start()

    def _drain(self) -> None:
        while True:
            try:
                data = os.read(self.master, 65536)
            except OSError:  # EIO: every writer closed the terminal
                return
            if not data:
                return
            self.chunks.append(data)

    @property
    def seen(self) -> bytes:
        return b"".join(self.chunks)

    def type(self, data: bytes) -> None:
        os.write(self.master, data)

    def close(self, timeout: float = 5) -> bytes:
        """Wait for the reader (every writer gone), close the master end; everything read."""
        if self._reader.is_alive() or self._reader.ident is not None:
            self._reader.join(timeout)
        try:
            os.close(self.master)
        except OSError:
            pass
        return self.seen
