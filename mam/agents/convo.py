"""Helpers shared by the adapters that read an agent CLI's own conversation store.

Owns: finding a CLI's folders from the environment recorded for a session (never
`os.environ`), the claude-style cwd slug, reading the first JSON line of a transcript,
opening a CLI's SQLite store briefly without creating it, and deleting a list of paths.
Must not know any one CLI's layout: that belongs to its adapter module.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import sqlite3
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from datetime import datetime
from pathlib import Path
from typing import Any

from mam.errors import AgentError

# Store timestamps are taken by the agent a moment after mam notes `since`, sometimes rounded
# to the second; this much slack still keeps conversations of earlier sessions out.
TOLERANCE_S = 2.0
_SAFE_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,127}$")


def home(env: Mapping[str, str]) -> Path:
    return Path(env.get("HOME") or os.path.expanduser("~"))


def env_dir(env: Mapping[str, str], key: str, default: Path) -> Path:
    """The folder named by `key` in `env` when it is set, else `default`."""
    value = env.get(key)
    return Path(value).expanduser() if value else default


def xdg_data_home(env: Mapping[str, str]) -> Path:
    return env_dir(env, "XDG_DATA_HOME", home(env) / ".local" / "share")


def claude_slug(cwd: str) -> str:
    """Claude Code's project folder name: every character outside [A-Za-z0-9-] becomes '-'."""
    return re.sub(r"[^A-Za-z0-9-]", "-", cwd)


def check_id(agent: str, conversation_id: str) -> str:
    """Refuse an id that could name a path outside the store (it is joined into paths)."""
    if not _SAFE_ID.match(conversation_id or "") or ".." in conversation_id:
        raise AgentError(f"{agent}: {conversation_id!r} is not a conversation id", conversation_id=conversation_id)
    return conversation_id


def same_dir(a: str, b: str) -> bool:
    return a == b or os.path.realpath(a) == os.path.realpath(b)


def first_json_line(path: Path, limit: int = 1 << 20) -> dict[str, Any] | None:
    """The first line of a JSONL file as a dict (None if missing, empty or not JSON)."""
    try:
        with open(path, encoding="utf-8") as f:
            line = f.readline(limit)
    except OSError:
        return None
    try:
        value = json.loads(line)
    except ValueError:
        return None
    return value if isinstance(value, dict) else None


def iso_epoch(text: object) -> float | None:
    """Seconds since the epoch from an ISO-8601 timestamp ('Z' accepted), or None."""
    if not isinstance(text, str) or not text:
        return None
    try:
        return datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp()
    except ValueError:
        return None


def mtime(path: Path) -> float:
    try:
        return path.stat().st_mtime
    except OSError:
        return 0.0


@contextmanager
def sqlite_store(path: Path) -> Iterator[sqlite3.Connection | None]:
    """A short connection to an existing SQLite store (None if there is none).

    mode=rw never creates the file, and closing the last connection removes the -wal/-shm
    files it made, so looking leaves nothing behind in the agent's folder.
    """
    if not path.is_file():
        yield None
        return
    try:
        conn = sqlite3.connect(f"file:{path}?mode=rw", uri=True, timeout=5.0)
    except sqlite3.Error as e:
        raise AgentError(f"cannot open {path}: {e}") from e
    conn.row_factory = sqlite3.Row
    try:
        yield conn
    except sqlite3.Error as e:
        raise AgentError(f"cannot read {path}: {e}") from e
    finally:
        conn.close()


def columns(conn: sqlite3.Connection, table: str) -> set[str]:
    """The column names of `table` (empty if it does not exist): stores change between versions."""
    return {row[1] for row in conn.execute(f'PRAGMA table_info("{table}")')}


def has_row(conn: sqlite3.Connection | None, table: str, row_id: str) -> bool:
    """True if `table` exists and has a row with that id."""
    if conn is None or "id" not in columns(conn, table):
        return False
    return conn.execute(f'SELECT 1 FROM "{table}" WHERE id = ?', (row_id,)).fetchone() is not None


def delete_sessions(conn: sqlite3.Connection, ids: list[str], *, table: str) -> int:
    """In one write transaction, delete the `table` rows of `ids` and every plain-table row whose
    session_id is one of them (virtual tables are left to the store's own triggers)."""
    marks = ",".join("?" * len(ids))
    plain = [
        r[0]
        for r in conn.execute(
            "SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%' AND sql NOT LIKE 'CREATE VIRTUAL%'"
        )
    ]
    conn.isolation_level = None
    conn.execute("BEGIN IMMEDIATE")
    try:
        count = 0
        for name in plain:
            if name != table and "session_id" in columns(conn, name):
                count += conn.execute(f'DELETE FROM "{name}" WHERE session_id IN ({marks})', ids).rowcount
        count += conn.execute(f'DELETE FROM "{table}" WHERE id IN ({marks})', ids).rowcount
        conn.execute("COMMIT")
    except BaseException:
        conn.execute("ROLLBACK")
        raise
    return count


def remove(paths: list[Path]) -> list[Path]:
    """Delete each existing file or folder; return what was deleted."""
    removed = []
    for path in paths:
        if path.is_dir() and not path.is_symlink():
            shutil.rmtree(path)
        elif path.exists() or path.is_symlink():
            path.unlink()
        else:
            continue
        removed.append(path)
    return removed
