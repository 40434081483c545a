"""The board's rows: one per key (value, version, writer, ts) and an audit row per write.

Each write runs in the caller's `BEGIN IMMEDIATE` transaction, so reading the current version,
checking `--if-version` and writing the next one is one step no other writer can get between.
"""

from __future__ import annotations

import sqlite3
from dataclasses import asdict, dataclass
from typing import Any


@dataclass(frozen=True)
class Entry:
    key: str
    value: str
    version: int
    writer: str
    ts: int  # milliseconds since the epoch
    deleted: bool = False

    def as_dict(self) -> dict[str, Any]:
        data = asdict(self)
        del data["deleted"]
        return data


class VersionMismatch(Exception):
    """Raised when a compare-and-set names a version other than the key's current one."""

    def __init__(self, current: int) -> None:
        super().__init__(current)
        self.current = current


def _entry(row: sqlite3.Row) -> Entry:
    return Entry(row["key"], row["value"], row["version"], row["writer"], row["ts"], bool(row["deleted"]))


def find(conn: sqlite3.Connection, key: str) -> Entry | None:
    """The key's row, deleted or not (None: never written)."""
    row = conn.execute("SELECT * FROM board WHERE key=?", (key,)).fetchone()
    return _entry(row) if row is not None else None


def list_live(conn: sqlite3.Connection, prefix: str = "") -> list[Entry]:
    # substr rather than LIKE: '_' and '%' are wildcards there and '_' is a legal key character.
    rows = conn.execute(
        "SELECT * FROM board WHERE deleted=0 AND substr(key, 1, ?)=? ORDER BY key", (len(prefix), prefix)
    )
    return [_entry(r) for r in rows]


def write(
    conn: sqlite3.Connection, key: str, value: str | None, *, writer: str, ts: int, if_version: int | None
) -> Entry:
    """Set (value) or delete (None) `key` at the next version; raise VersionMismatch on a stale
    `if_version` (the current version of a key never written or deleted counts as what it was: 0 if
    never written). Writes its audit row in the same transaction."""
    old = find(conn, key)
    current = 0 if old is None else old.version
    live = 0 if old is None or old.deleted else current
    if if_version is not None and if_version != live:
        raise VersionMismatch(live)
    entry = Entry(key, value or "", current + 1, writer, ts, deleted=value is None)
    conn.execute(
        "INSERT OR REPLACE INTO board(key, value, version, writer, ts, deleted) VALUES (?,?,?,?,?,?)",
        (entry.key, entry.value, entry.version, entry.writer, entry.ts, int(entry.deleted)),
    )
    conn.execute(
        "INSERT INTO board_audit(key, op, value, version, writer, ts) VALUES (?,?,?,?,?,?)",
        (key, "delete" if entry.deleted else "set", entry.value, entry.version, writer, ts),
    )
    return entry


def audit(conn: sqlite3.Connection, key: str | None = None) -> list[dict[str, Any]]:
    """The audit rows, oldest first (of one key, or of all)."""
    if key is None:
        rows = conn.execute("SELECT * FROM board_audit ORDER BY n")
    else:
        rows = conn.execute("SELECT * FROM board_audit WHERE key=? ORDER BY n", (key,))
    return [dict(r) for r in rows]


def any_entry(conn: sqlite3.Connection) -> bool:
    """Whether the board holds any key (live or deleted)."""
    return conn.execute("SELECT 1 FROM board LIMIT 1").fetchone() is not None
