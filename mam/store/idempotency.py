"""Idempotency keys: which job a key names (`mam job delegate --idempotency-key K`, `--dedup`).

`claim` runs inside the write transaction that inserts the new job (mam.store.journal.commit), so
SQLite's `BEGIN IMMEDIATE` serializes every claimant of a key across processes: the first one
inserts its job and the key, every later one finds the key and attaches to that job instead.

A key names its job while the job is open and until `ttl_s` seconds after the key was claimed;
after that the next claimant takes the key over for a new job.
"""

from __future__ import annotations

import sqlite3
import time

from mam.store import jobs as jobs_table
from mam.store.jobs import JobRow


def claim(conn: sqlite3.Connection, key: str, job_id: str, *, ttl_s: float) -> JobRow | None:
    """The job `key` still names (the caller attaches to it), or None after the key was given to `job_id`.

    Call inside a write transaction, before inserting the job `job_id`."""
    now = time.time()
    row = conn.execute("SELECT job_id, created_at FROM idempotency_keys WHERE key=?", (key,)).fetchone()
    if row is not None:
        holder = jobs_table.find(conn, str(row["job_id"]))
        if holder is not None and (holder.open or float(row["created_at"]) + ttl_s > now):
            return holder
    conn.execute(
        "INSERT INTO idempotency_keys(key, job_id, created_at) VALUES (?,?,?) "
        "ON CONFLICT(key) DO UPDATE SET job_id=excluded.job_id, created_at=excluded.created_at",
        (key, job_id, now),
    )
    return None
