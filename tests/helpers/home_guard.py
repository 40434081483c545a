"""Fail the run if a test wrote into the real user's agent folders."""

from __future__ import annotations

import os
from pathlib import Path

AGENT_DIRS = (".claude", ".codex", ".gemini", ".grok", ".hermes", ".local/share/opencode", ".config/herdr", ".mam-demo")


def snapshot(home: Path) -> dict[str, float]:
    seen: dict[str, float] = {}
    for rel in AGENT_DIRS:
        root = home / rel
        if not root.exists():
            continue
        for folder, dirs, files in os.walk(root):
            for name in dirs + files:
                path = Path(folder) / name
                try:
                    seen[str(path)] = path.lstat().st_mtime
                except OSError:
                    pass
        seen[str(root)] = root.lstat().st_mtime
    return seen


def diff(before: dict[str, float], after: dict[str, float]) -> list[str]:
    changed = [p for p in after if p not in before or after[p] != before[p]]
    removed = [p for p in before if p not in after]
    return sorted(changed + removed)
