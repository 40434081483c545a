"""The YAML mirror of the sessions table, for people and tools that cannot read SQLite.

Rewritten after every committed session write: rendered from one read snapshot,
parsed back and compared (validated), then replaced atomically (temp, fsync, rename).
A generation number makes a stale mirror (writer killed after commit) repairable.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from mam.errors import StoreError
from mam.util.fs import atomic_write

HEADER = "# Mirror of .mam/agent-sessions.db, written by mam after every change. Do not edit: edits are lost.\n"


def render(generation: int, sessions: list[dict[str, Any]]) -> bytes:
    import yaml

    doc = {"version": 1, "generation": generation, "sessions": sessions}
    dumper = getattr(yaml, "CSafeDumper", yaml.SafeDumper)
    text = HEADER + yaml.dump(doc, Dumper=dumper, sort_keys=False, allow_unicode=True, default_flow_style=False)
    loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
    if yaml.load(text, Loader=loader) != doc:
        raise StoreError("the sessions mirror did not survive a YAML round trip; not written")
    return text.encode("utf-8")


def write(path: Path, generation: int, sessions: list[dict[str, Any]]) -> None:
    atomic_write(path, render(generation, sessions), mode=0o644)


def read_generation(path: Path) -> int:
    """The generation recorded in an existing mirror (-1 if absent or unreadable); reads the header only."""
    try:
        with open(path, encoding="utf-8") as f:
            for _ in range(5):
                line = f.readline()
                if line.startswith("generation:"):
                    return int(line.split(":", 1)[1])
    except (OSError, ValueError):
        pass
    return -1
