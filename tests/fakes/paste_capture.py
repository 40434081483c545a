"""A pane program that records what it receives: `python paste_capture.py OUT`.

It puts its terminal in raw mode, enables bracketed paste (ESC[?2004h), prints READY, then writes
the bytes between the first ESC[200~ and ESC[201~ to OUT (atomically: OUT appears complete or not
at all). Every byte it reads after that paste is appended to OUT.after as it arrives, so a test can
see keys (Enter, C-c...) reach the program. Stdlib only; it runs until its terminal closes.
"""

from __future__ import annotations

import os
import sys
import termios
import tty

START, END = b"\x1b[200~", b"\x1b[201~"


def main(out: str) -> int:
    fd = sys.stdin.fileno()
    tty.setraw(fd, termios.TCSANOW)
    os.write(sys.stdout.fileno(), b"\x1b[?2004h" + b"READY\r\n")
    buffer = bytearray()
    while True:
        chunk = os.read(fd, 65536)
        if not chunk:
            return 1
        buffer += chunk
        start = buffer.find(START)
        end = buffer.find(END, start + len(START)) if start >= 0 else -1
        if end >= 0:
            break
    tmp = f"{out}.tmp"
    with open(tmp, "wb") as f:
        f.write(bytes(buffer[start + len(START) : end]))
    os.replace(tmp, out)
    with open(f"{out}.after", "ab", buffering=0) as after:
        after.write(bytes(buffer[end + len(END) :]))
        while True:
            chunk = os.read(fd, 65536)
            if not chunk:
                return 0
            after.write(chunk)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
