"""The reservations table (migration 6): each job's place in the governor's queue, its running slot
and its token reservation. SQL only; every function runs inside the caller's transaction.

Status: `queued` (waits for a slot or a budget), `held` (admitted: a running slot while its job is
open, and `reserved` tokens until it settles), then `committed` (its usage, for good) or
`released` (nothing spent).
"""

from __future__ import annotations

import sqlite3
import time
from dataclasses import dataclass

QUEUED, HELD, COMMITTED, RELEASED = "queued", "held", "committed", "released"


@dataclass(frozen=True)
class Row:
    job_id: str
    qid: int
    session: str
    role: str
    reserved: int
    status: str
    committed: int
    source: str
    day: str
    job_state: str  # the job's state in the jobs table
    owner: str
    data: str  # the job row's data (JSON), for a settlement after its wrapper died


def utc_day(at: float | None = None) -> str:
    return time.strftime("%Y-%m-%d", time.gmtime(at if at is not None else time.time()))


def _rows(conn: sqlite3.Connection, where: str, params: tuple[object, ...] = ()) -> list[Row]:
    sql = (
        "SELECT r.job_id, r.qid, r.session, r.role, r.reserved, r.status, r.committed, r.source, r.day, "
        "COALESCE(j.state, ''), COALESCE(j.owner, ''), COALESCE(j.data, '{}') "
        f"FROM reservations r LEFT JOIN jobs j ON j.id = r.job_id WHERE {where} ORDER BY r.qid"
    )
    return [Row(*r) for r in conn.execute(sql, params)]


def unsettled(conn: sqlite3.Connection) -> list[Row]:
    """Rows still queued or held (whatever their job's state)."""
    return _rows(conn, "r.status IN (?, ?)", (QUEUED, HELD))


def find(conn: sqlite3.Connection, job_id: str) -> Row | None:
    rows = _rows(conn, "r.job_id = ?", (job_id,))
    return rows[0] if rows else None


def put(
    conn: sqlite3.Connection, *, job_id: str, qid: int, session: str, role: str, reserved: int, status: str
) -> None:
    """Queue or hold a job's reservation (a new row, or the job's queued row moved on)."""
    conn.execute(
        "INSERT INTO reservations(job_id, qid, session, role, reserved, status, reserved_at) VALUES (?,?,?,?,?,?,?) "
        "ON CONFLICT(job_id) DO UPDATE SET reserved=excluded.reserved, status=excluded.status, "
        "reserved_at=excluded.reserved_at WHERE reservations.status IN (?, ?)",
        (job_id, qid, session, role, reserved, status, time.time(), QUEUED, HELD),
    )


def settle(conn: sqlite3.Connection, job_id: str, *, committed: int, source: str) -> bool:
    """Commit `committed` tokens (or release, with 0 and source ''); False if it was already settled."""
    status = COMMITTED if committed > 0 else RELEASED
    now = time.time()
    cur = conn.execute(
        "UPDATE reservations SET status=?, committed=?, source=?, settled_at=?, day=? WHERE job_id=? "
        "AND status IN (?, ?)",
        (status, max(committed, 0), source, now, utc_day(now), job_id, QUEUED, HELD),
    )
    return cur.rowcount == 1


def committed_total(conn: sqlite3.Connection, *, day: str = "", session: str = "") -> int:
    where, params = ["status = ?"], [COMMITTED]
    if day:
        where.append("day = ?")
        params.append(day)
    if session:
        where.append("session = ?")
        params.append(session)
    sql = f"SELECT COALESCE(SUM(committed), 0) FROM reservations WHERE {' AND '.join(where)}"
    return int(conn.execute(sql, params).fetchone()[0])


def committed_by(conn: sqlite3.Connection, column: str) -> dict[str, int]:
    """Committed tokens per session or per role."""
    assert column in ("session", "role")
    sql = f"SELECT {column}, SUM(committed) FROM reservations WHERE status = ? GROUP BY {column}"
    return {str(k): int(v) for k, v in conn.execute(sql, (COMMITTED,))}


def recent_usage(conn: sqlite3.Connection, role: str, completed: str, limit: int = 20) -> list[int]:
    """The measured usage of the role's last `limit` completed jobs, newest first."""
    rows = conn.execute(
        "SELECT r.committed FROM reservations r JOIN jobs j ON j.id = r.job_id WHERE r.role = ? AND j.state = ? "
        "AND r.status = ? AND r.source = 'measured' ORDER BY r.qid DESC LIMIT ?",
        (role, completed, COMMITTED, limit),
    )
    return [int(r[0]) for r in rows]


def mark_once(conn: sqlite3.Connection, key: str) -> bool:
    """True the first time `key` is marked in this workspace."""
    cur = conn.execute("INSERT OR IGNORE INTO governor_marks(key, at) VALUES (?, ?)", (key, time.time()))
    return cur.rowcount == 1


def attaches(conn: sqlite3.Connection) -> dict[str, int]:
    """Audit rows of kind `attached` per job (each one a delegation that attached to an existing job)."""
    rows = conn.execute("SELECT job_id, COUNT(*) FROM job_audit WHERE kind = 'attached' GROUP BY job_id")
    return {str(k): int(v) for k, v in rows}
