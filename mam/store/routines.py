"""The routines' rows (mam/routines): the routine, one receipt per tick, webhook deliveries taken.

Every function runs inside the caller's transaction (`registry.write()` / `registry.read()`), so a
tick is decided, and its routine's next tick moved on, in one step no other writer gets between.
"""

from __future__ import annotations

import sqlite3
from dataclasses import asdict, dataclass
from typing import Any

KEEP_TICKS = 1000  # receipts kept per routine (the oldest ended ones go first), refused ones not counted
KEEP_REFUSED = 100  # refused receipts kept per routine, apart: refusals never evict a tick that fired
KEEP_DELIVERIES_S = 86400.0  # a delivery id is remembered this long (a delivery is valid for 5 minutes)

PENDING, FIRING, DONE, SKIPPED, REFUSED = "pending", "firing", "done", "skipped", "refused"


@dataclass(frozen=True)
class RoutineRow:
    name: str
    target: str
    brief: str
    kind: str  # every | cron | webhook
    spec: str
    tz: str
    anchor: float
    concurrency: str  # skip | coalesce | queue
    catch_up: str  # skip | once | all:N
    max_tokens: int | None
    timeout_s: float | None
    paused: bool
    next_at: float | None
    secret: str
    created_at: float
    updated_at: float

    @classmethod
    def from_sql(cls, row: sqlite3.Row) -> RoutineRow:
        data = dict(row)
        data["paused"] = bool(data["paused"])
        return cls(**data)

    def as_dict(self) -> dict[str, Any]:
        """Everything but the secret (it signs webhook deliveries)."""
        data = asdict(self)
        data["webhook"] = bool(data.pop("secret"))
        return data


@dataclass(frozen=True)
class TickRow:
    n: int
    routine: str
    key: str
    trigger: str  # schedule | run | webhook
    scheduled: float
    status: str
    reason: str
    detail: str
    text: str
    job_id: str
    outcome: str
    exit_code: int | None
    created_at: float
    fired_at: float | None
    ended_at: float | None

    @classmethod
    def from_sql(cls, row: sqlite3.Row) -> TickRow:
        return cls(**dict(row))


def insert(conn: sqlite3.Connection, row: RoutineRow) -> None:
    """Add a routine; sqlite3.IntegrityError if the name is taken."""
    data = asdict(row)
    data["paused"] = int(row.paused)
    cols = ",".join(data)
    conn.execute(f"INSERT INTO routines({cols}) VALUES ({','.join('?' * len(data))})", tuple(data.values()))


def find(conn: sqlite3.Connection, name: str) -> RoutineRow | None:
    row = conn.execute("SELECT * FROM routines WHERE name=?", (name,)).fetchone()
    return RoutineRow.from_sql(row) if row is not None else None


def list_all(conn: sqlite3.Connection) -> list[RoutineRow]:
    return [RoutineRow.from_sql(r) for r in conn.execute("SELECT * FROM routines ORDER BY name")]


def update(conn: sqlite3.Connection, name: str, *, now: float, **changes: Any) -> None:
    sets = ",".join(f"{k}=?" for k in changes)
    conn.execute(f"UPDATE routines SET {sets}, updated_at=? WHERE name=?", (*changes.values(), now, name))


def delete(conn: sqlite3.Connection, name: str) -> None:
    for table, col in (("routines", "name"), ("routine_ticks", "routine"), ("routine_deliveries", "routine")):
        conn.execute(f"DELETE FROM {table} WHERE {col}=?", (name,))


def any_enabled(conn: sqlite3.Connection) -> bool:
    return conn.execute("SELECT 1 FROM routines WHERE paused=0 LIMIT 1").fetchone() is not None


# -- receipts ---------------------------------------------------------------------------------------
def add_tick(
    conn: sqlite3.Connection,
    *,
    routine: str,
    key: str,
    trigger: str,
    scheduled: float,
    now: float,
    status: str = PENDING,
    reason: str = "",
    detail: str = "",
    text: str = "",
) -> int | None:
    """Record a tick once (its key is unique); its number, or None if that key was recorded already."""
    cur = conn.execute(
        "INSERT OR IGNORE INTO routine_ticks(routine, key, trigger, scheduled, status, reason, detail, text, "
        "created_at) VALUES (?,?,?,?,?,?,?,?,?)",
        (routine, key, trigger, scheduled, status, reason, detail, text, now),
    )
    if cur.rowcount == 0:
        return None
    _prune(conn, routine)
    return int(cur.lastrowid or 0)


def _prune(conn: sqlite3.Connection, routine: str) -> None:
    """Keep the last KEEP_TICKS receipts of ticks and, apart from them, the last KEEP_REFUSED refusals."""
    conn.execute(
        "DELETE FROM routine_ticks WHERE routine=? AND status NOT IN (?, ?, ?) AND n <= "
        "(SELECT n FROM routine_ticks WHERE routine=? AND status != ? ORDER BY n DESC LIMIT 1 OFFSET ?)",
        (routine, PENDING, FIRING, REFUSED, routine, REFUSED, KEEP_TICKS),
    )
    conn.execute(
        "DELETE FROM routine_ticks WHERE routine=? AND status=? AND n <= "
        "(SELECT n FROM routine_ticks WHERE routine=? AND status=? ORDER BY n DESC LIMIT 1 OFFSET ?)",
        (routine, REFUSED, routine, REFUSED, KEEP_REFUSED),
    )


def set_tick(conn: sqlite3.Connection, n: int, **changes: Any) -> None:
    sets = ",".join(f"{k}=?" for k in changes)
    conn.execute(f"UPDATE routine_ticks SET {sets} WHERE n=?", (*changes.values(), n))


def tick(conn: sqlite3.Connection, n: int) -> TickRow | None:
    row = conn.execute("SELECT * FROM routine_ticks WHERE n=?", (n,)).fetchone()
    return TickRow.from_sql(row) if row is not None else None


def ticks(conn: sqlite3.Connection, routine: str, *, limit: int) -> list[TickRow]:
    """The routine's last `limit` receipts, newest first."""
    rows = conn.execute("SELECT * FROM routine_ticks WHERE routine=? ORDER BY n DESC LIMIT ?", (routine, limit))
    return [TickRow.from_sql(r) for r in rows]


def unfinished(conn: sqlite3.Connection) -> list[TickRow]:
    """Every tick still pending or firing, oldest first."""
    rows = conn.execute("SELECT * FROM routine_ticks WHERE status IN (?, ?) ORDER BY n", (PENDING, FIRING))
    return [TickRow.from_sql(r) for r in rows]


def last_fired(conn: sqlite3.Connection, routine: str) -> TickRow | None:
    """The routine's latest tick that fired (or is firing)."""
    row = conn.execute(
        "SELECT * FROM routine_ticks WHERE routine=? AND job_id != '' ORDER BY fired_at DESC, n DESC LIMIT 1",
        (routine,),
    ).fetchone()
    return TickRow.from_sql(row) if row is not None else None


# -- webhook deliveries -----------------------------------------------------------------------------
def take_delivery(conn: sqlite3.Connection, routine: str, delivery: str, *, now: float) -> bool:
    """True the first time `delivery` is seen for `routine` (remembered KEEP_DELIVERIES_S), else False."""
    conn.execute("DELETE FROM routine_deliveries WHERE at < ?", (now - KEEP_DELIVERIES_S,))
    cur = conn.execute(
        "INSERT OR IGNORE INTO routine_deliveries(routine, delivery, at) VALUES (?,?,?)", (routine, delivery, now)
    )
    return cur.rowcount == 1


# -- the workspace's meta rows ----------------------------------------------------------------------
def meta(conn: sqlite3.Connection, key: str) -> str | None:
    row = conn.execute("SELECT value FROM meta WHERE key=?", (key,)).fetchone()
    return None if row is None else str(row[0])


def set_meta(conn: sqlite3.Connection, key: str, value: str) -> None:
    conn.execute("INSERT OR REPLACE INTO meta(key, value) VALUES (?,?)", (key, value))


def delete_meta(conn: sqlite3.Connection, key: str) -> None:
    conn.execute("DELETE FROM meta WHERE key=?", (key,))


def withdraw_tick(conn: sqlite3.Connection, n: int) -> bool:
    """Delete tick `n` if it is still pending and undecided; whether it was deleted."""
    cur = conn.execute("DELETE FROM routine_ticks WHERE n=? AND status=? AND reason=''", (n, PENDING))
    return cur.rowcount == 1


def recent_ticks(conn: sqlite3.Connection, limit: int) -> list[sqlite3.Row]:
    """The last `limit` ticks of every routine, newest first (raw rows)."""
    return list(conn.execute("SELECT * FROM routine_ticks ORDER BY n DESC LIMIT ?", (limit,)))


def targets(conn: sqlite3.Connection) -> dict[str, sqlite3.Row]:
    """Each routine's name, next_at and target (raw rows), by name."""
    return {str(r["name"]): r for r in conn.execute("SELECT name, next_at, target FROM routines")}
