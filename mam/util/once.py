"""Warnings said at most once per process: a settings warning (an unknown `.mam.env` key) reaches a command
from its own settings, from the node's frames and from a broker client's settings; each says it only once."""

from __future__ import annotations

_said: set[str] = set()


def first(text: str) -> bool:
    """True the first time this process asks about `text` (then it is said), False every later time."""
    if text in _said:
        return False
    _said.add(text)
    return True
