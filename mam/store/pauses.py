"""Pauses in the registry: each paused job's mode and who paused it (`job_pauses`), and the workspace's hold
(`mam pause --all`: the `meta` row `hold`). A job is paused when its own row says so (state `paused`); its
`job_pauses` row only says how. Both survive any restart: they are the registry's."""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Iterable
from dataclasses import dataclass

from mam.store.routines import meta, set_meta

HOLD_KEY = "hold"


@dataclass(frozen=True)
class PauseRow:
    mode: str
    since_ms: int
    by: str

    def as_dict(self) -> dict[str, object]:
        """What `job status --json` shows as `paused`: since in seconds, as the other times of a job."""
        return {"mode": self.mode, "since": self.since_ms / 1000, "by": self.by}


def view(pause: PauseRow | None) -> dict[str, object]:
    """A paused job's `paused`: {mode, since, by} (safe, if its row in job_pauses was lost)."""
    return pause.as_dict() if pause is not None else {"mode": "safe", "since": None, "by": ""}


def get(conn: sqlite3.Connection, job_id: str) -> PauseRow | None:
    row = conn.execute("SELECT mode, since_ms, by FROM job_pauses WHERE job_id=?", (job_id,)).fetchone()
    return None if row is None else PauseRow(str(row[0]), int(row[1]), str(row[2]))


def of(conn: sqlite3.Connection, job_ids: Iterable[str]) -> dict[str, PauseRow]:
    ids = list(job_ids)
    if not ids:
        return {}
    marks = ",".join("?" * len(ids))
    rows = conn.execute(f"SELECT job_id, mode, since_ms, by FROM job_pauses WHERE job_id IN ({marks})", ids)
    return {str(r[0]): PauseRow(str(r[1]), int(r[2]), str(r[3])) for r in rows}


def put(conn: sqlite3.Connection, job_id: str, pause: PauseRow) -> None:
    conn.execute(
        "INSERT OR REPLACE INTO job_pauses(job_id, mode, since_ms, by) VALUES (?,?,?,?)",
        (job_id, pause.mode, pause.since_ms, pause.by),
    )


def drop(conn: sqlite3.Connection, job_id: str) -> None:
    conn.execute("DELETE FROM job_pauses WHERE job_id=?", (job_id,))


def hold(conn: sqlite3.Connection) -> PauseRow | None:
    """The workspace's hold, or None."""
    value = meta(conn, HOLD_KEY)
    if not value:
        return None
    try:
        data = json.loads(value)
        return PauseRow(str(data["mode"]), int(data["since_ms"]), str(data.get("by", "")))
    except (ValueError, KeyError, TypeError):
        return PauseRow("safe", 0, "")  # unreadable: still a hold (nothing is typed), never none


def set_hold(conn: sqlite3.Connection, pause: PauseRow | None) -> None:
    value = "" if pause is None else json.dumps({"mode": pause.mode, "since_ms": pause.since_ms, "by": pause.by})
    set_meta(conn, HOLD_KEY, value)
