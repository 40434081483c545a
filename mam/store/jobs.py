"""Job rows and their events in SQLite: the queue order per session, compare-and-set ownership,
per-job sequence numbers and the local event store (the disk path that survives a broker outage).

Job tokens are never stored here: they live only in the 0600 job record file (see journal.py).
"""

from __future__ import annotations

import json
import sqlite3
import time
from dataclasses import dataclass
from typing import Any

from mam.errors import JobError, JobNotFound
from mam.outcomes import OPEN_STATES


@dataclass(frozen=True)
class JobRow:
    qid: int
    id: str
    session: str
    kind: str
    target: str
    parent_job: str | None
    state: str
    reason: str
    exit_code: int | None
    owner: str
    data: dict[str, Any]
    created_at: float
    updated_at: float
    ended_at: float | None
    epoch: int = 0  # the fencing epoch: raised whenever another process takes the job over

    @property
    def open(self) -> bool:
        return self.state in OPEN_STATES

    @classmethod
    def from_sql(cls, row: sqlite3.Row) -> JobRow:
        data = dict(row)
        data["data"] = json.loads(data["data"] or "{}")
        return cls(**data)


@dataclass(frozen=True)
class EventRow:
    job_id: str
    seq: int
    type: str
    sender: str
    ts: float
    raw: str
    recorded_at: float
    published: bool


def insert(
    conn: sqlite3.Connection,
    *,
    job_id: str,
    session: str,
    kind: str,
    target: str,
    parent_job: str | None,
    state: str,
    owner: str,
    data: dict[str, Any],
    epoch: int = 0,
) -> JobRow:
    now = time.time()
    try:
        conn.execute(
            "INSERT INTO jobs(id, session, kind, target, parent_job, state, owner, data, created_at, updated_at, "
            "epoch) VALUES (?,?,?,?,?,?,?,?,?,?,?)",
            (
                job_id,
                session,
                kind,
                target,
                parent_job,
                state,
                owner,
                json.dumps(data, sort_keys=True),
                now,
                now,
                epoch,
            ),
        )
    except sqlite3.IntegrityError as e:
        raise JobError(f"a job with id {job_id!r} already exists", job_id=job_id) from e
    conn.execute("INSERT OR IGNORE INTO seqs(job_id, last) VALUES (?, 0)", (job_id,))
    return get(conn, job_id)


def get(conn: sqlite3.Connection, job_id: str) -> JobRow:
    row = conn.execute("SELECT * FROM jobs WHERE id=?", (job_id,)).fetchone()
    if row is None:
        raise JobNotFound(f"no job {job_id!r} in this workspace", job_id=job_id)
    return JobRow.from_sql(row)


def find(conn: sqlite3.Connection, job_id: str) -> JobRow | None:
    row = conn.execute("SELECT * FROM jobs WHERE id=?", (job_id,)).fetchone()
    return JobRow.from_sql(row) if row else None


def update(
    conn: sqlite3.Connection,
    job_id: str,
    *,
    expected_owner: str | None = None,
    expected_state: str | None = None,
    **changes: Any,
) -> bool:
    """Apply `changes`; with `expected_owner` / `expected_state`, only if the row still has them (compare-and-set)."""
    allowed = {"state", "reason", "exit_code", "owner", "data", "ended_at", "session", "target", "epoch"}
    bad = set(changes) - allowed
    if bad:
        raise ValueError(f"unknown job fields: {sorted(bad)}")
    if "data" in changes:
        changes["data"] = json.dumps(changes["data"], sort_keys=True)
    changes["updated_at"] = time.time()
    sql = f"UPDATE jobs SET {', '.join(f'{k}=?' for k in changes)} WHERE id=?"
    params: list[Any] = [*changes.values(), job_id]
    if expected_owner is not None:
        sql += " AND owner=?"
        params.append(expected_owner)
    if expected_state is not None:
        sql += " AND state=?"
        params.append(expected_state)
    return conn.execute(sql, params).rowcount == 1


def raise_epoch(conn: sqlite3.Connection, job_id: str, epoch: int) -> bool:
    """Raise an open job's epoch to `epoch` (a runner's copy told of a re-dispatch); False if it is not lower."""
    marks = ",".join("?" * len(OPEN_STATES))
    cur = conn.execute(
        f"UPDATE jobs SET epoch=?, updated_at=? WHERE id=? AND epoch<? AND state IN ({marks})",
        (epoch, time.time(), job_id, epoch, *OPEN_STATES),
    )
    return cur.rowcount == 1


def open_jobs_ahead(conn: sqlite3.Connection, session: str, qid: int) -> list[JobRow]:
    """Open jobs of `session` registered before the job with queue id `qid` (FIFO per session)."""
    marks = ",".join("?" * len(OPEN_STATES))
    rows = conn.execute(
        f"SELECT * FROM jobs WHERE session=? AND qid<? AND state IN ({marks}) ORDER BY qid",
        (session, qid, *OPEN_STATES),
    )
    return [JobRow.from_sql(r) for r in rows]


def open_jobs(conn: sqlite3.Connection, session: str | None = None) -> list[JobRow]:
    marks = ",".join("?" * len(OPEN_STATES))
    if session is None:
        rows = conn.execute(f"SELECT * FROM jobs WHERE state IN ({marks}) ORDER BY qid", OPEN_STATES)
    else:
        rows = conn.execute(
            f"SELECT * FROM jobs WHERE session=? AND state IN ({marks}) ORDER BY qid", (session, *OPEN_STATES)
        )
    return [JobRow.from_sql(r) for r in rows]


def recently_updated(conn: sqlite3.Connection, since: float, limit: int = 1000) -> list[JobRow]:
    rows = conn.execute("SELECT * FROM jobs WHERE updated_at >= ? ORDER BY updated_at DESC LIMIT ?", (since, limit))
    return [JobRow.from_sql(r) for r in rows]


def list_jobs(
    conn: sqlite3.Connection,
    *,
    session: str | None = None,
    parent: str | None = None,
    state: str | None = None,
    limit: int = 100,
) -> list[JobRow]:
    where, params = [], []
    for column, value in (("session", session), ("parent_job", parent), ("state", state)):
        if value is not None:
            where.append(f"{column}=?")
            params.append(value)
    clause = f"WHERE {' AND '.join(where)}" if where else ""
    rows = conn.execute(f"SELECT * FROM jobs {clause} ORDER BY qid DESC LIMIT ?", (*params, limit))
    return [JobRow.from_sql(r) for r in rows]


# -- audit rows (numbered per job, committed with the state they go with; see journal.py) ----------
def add_audit(conn: sqlite3.Connection, job_id: str, lines: list[dict[str, Any]]) -> list[tuple[int, str]]:
    """Number `lines` (each with its `kind`) after the job's last one and store them; return (n, JSON line) of each."""
    if not lines:
        return []
    last = int(conn.execute("SELECT COALESCE(MAX(n), 0) FROM job_audit WHERE job_id=?", (job_id,)).fetchone()[0])
    rows = [
        (
            job_id,
            last + i,
            line["kind"],
            json.dumps({**line, "n": last + i}, sort_keys=True, ensure_ascii=False, default=str),
        )
        for i, line in enumerate(lines, start=1)
    ]
    conn.executemany("INSERT INTO job_audit(job_id, n, kind, line) VALUES (?,?,?,?)", rows)
    return [(n, text) for _job, n, _kind, text in rows]


def audit_after(conn: sqlite3.Connection, job_id: str, n: int = 0) -> list[tuple[int, str]]:
    """(n, JSON line) of the job's audit rows numbered after `n`, in order."""
    rows = conn.execute("SELECT n, line FROM job_audit WHERE job_id=? AND n>? ORDER BY n", (job_id, n))
    return [(int(r[0]), str(r[1])) for r in rows]


def inputs_after(
    conn: sqlite3.Connection, job_id: str, n: int = 0, *, also: tuple[str, ...] = ()
) -> list[dict[str, Any]]:
    """The job's transition lines (and its lines of the kinds `also`) numbered after `n`, in order."""
    kinds = ("input", *also)
    rows = conn.execute(
        f"SELECT line FROM job_audit WHERE job_id=? AND n>? AND kind IN ({','.join('?' * len(kinds))}) ORDER BY n",
        (job_id, n, *kinds),
    )
    return [json.loads(r[0]) for r in rows]


# -- events -------------------------------------------------------------------------------------
def next_seq(conn: sqlite3.Connection, job_id: str) -> int:
    """Allocate the job's next sequence number (call inside a write transaction)."""
    conn.execute("INSERT OR IGNORE INTO seqs(job_id, last) VALUES (?, 0)", (job_id,))
    conn.execute("UPDATE seqs SET last = last + 1 WHERE job_id=?", (job_id,))
    return int(conn.execute("SELECT last FROM seqs WHERE job_id=?", (job_id,)).fetchone()[0])


def add_event(
    conn: sqlite3.Connection,
    *,
    job_id: str,
    seq: int,
    type: str,
    sender: str,
    ts: float,
    raw: str,
    published: bool = False,
) -> bool:
    """Record an event; False if that (job, seq) is already recorded."""
    cur = conn.execute(
        "INSERT OR IGNORE INTO events(job_id, seq, type, sender, ts, raw, recorded_at, published) VALUES "
        "(?,?,?,?,?,?,?,?)",
        (job_id, seq, type, sender, ts, raw, time.time(), int(published)),
    )
    return cur.rowcount == 1


def mark_published(conn: sqlite3.Connection, job_id: str, seq: int) -> None:
    conn.execute("UPDATE events SET published=1 WHERE job_id=? AND seq=?", (job_id, seq))


def events_after(conn: sqlite3.Connection, job_id: str, seq: int = 0) -> list[EventRow]:
    rows = conn.execute("SELECT * FROM events WHERE job_id=? AND seq>? ORDER BY seq", (job_id, seq))
    return [EventRow(**{**dict(r), "published": bool(r["published"])}) for r in rows]


def unpublished(conn: sqlite3.Connection, limit: int = 500) -> list[EventRow]:
    rows = conn.execute("SELECT * FROM events WHERE published=0 ORDER BY job_id, seq LIMIT ?", (limit,))
    return [EventRow(**{**dict(r), "published": bool(r["published"])}) for r in rows]


def sessions_in_state(conn: sqlite3.Connection, state: str) -> list[str]:
    """The session of each job in `state` (a session once per such job)."""
    return [str(r[0]) for r in conn.execute("SELECT session FROM jobs WHERE state = ?", (state,))]


def last_progress_raw(conn: sqlite3.Connection, job_id: str) -> str | None:
    """The raw envelope of the job's last `progress` or `started` event, or None."""
    row = conn.execute(
        "SELECT raw FROM events WHERE job_id=? AND type IN ('progress','started') ORDER BY seq DESC LIMIT 1", (job_id,)
    ).fetchone()
    return None if row is None else str(row[0])
