"""`mam doctor`'s look at a registry file it may not trust: read-only, no migration, no write queue."""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any


def examine(path: Path) -> tuple[int, list[str], dict[str, dict[str, Any]] | None]:
    """The file's schema version, its integrity problems (["ok"]: none) and its session rows by name
    (None unless it is intact). Raises sqlite3.Error for a file SQLite cannot read."""
    conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    try:
        version = int(conn.execute("PRAGMA user_version").fetchone()[0])
        problems = [str(r[0]) for r in conn.execute("PRAGMA integrity_check(5)")]
        conn.row_factory = sqlite3.Row
        sessions = {r["name"]: dict(r) for r in conn.execute("SELECT * FROM sessions")} if problems == ["ok"] else None
    finally:
        conn.close()
    return version, problems, sessions


def read_sessions(path: Path) -> dict[str, dict[str, Any]] | None:
    """The file's session rows by name, or None if it cannot be read."""
    try:
        conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
        try:
            conn.row_factory = sqlite3.Row
            return {r["name"]: dict(r) for r in conn.execute("SELECT * FROM sessions")}
        finally:
            conn.close()
    except sqlite3.Error:
        return None
