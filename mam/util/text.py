"""Text from agents or the wire made safe to print on a terminal."""

from __future__ import annotations

import re

# ESC and the other C0/C1 controls; tab and newline stay.
_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")


def printable(text: str) -> str:
    """`text` with every control character (ESC above all) replaced by '?'."""
    return _CONTROL.sub("?", text)
