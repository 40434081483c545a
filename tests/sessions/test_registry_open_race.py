"""Many processes opening a registry that does not exist yet: every one of them gets it.

While one process creates the file and switches it to WAL, SQLite can answer "database is
locked" to another without calling its busy handler; opening must wait that out, not fail
(CI once failed a `mam session create` on exactly this).
"""

from __future__ import annotations

import multiprocessing
from pathlib import Path

from mam.store.db import SCHEMA_VERSION, Database

ROUNDS = 100
OPENERS = 8


def _open_and_write(path: str) -> str:
    try:
        db = Database(Path(path))
        with db.transaction() as conn:
            conn.execute("UPDATE meta SET value = value WHERE key = 'sessions_gen'")
        version = db.conn.execute("PRAGMA user_version").fetchone()[0]
        db.conn.close()
        return "" if version == SCHEMA_VERSION else f"schema version {version}"
    except Exception as e:  # reported back to the test, which shows it
        return f"{type(e).__name__}: {e}"


def test_concurrent_first_opens_all_succeed(tmp_path: Path) -> None:
    ctx = multiprocessing.get_context("fork")
    failures: list[str] = []
    with ctx.Pool(OPENERS) as pool:
        for n in range(ROUNDS):
            path = str(tmp_path / f"r{n}" / "agent-sessions.db")
            failures += [f for f in pool.map(_open_and_write, [path] * OPENERS) if f]
    assert failures == []
