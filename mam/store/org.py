"""The organisation's rows (mam/org): roles, tasks, their blockers, and one run per wake of a task.

Every function runs inside the caller's transaction (`registry.write()` / `registry.read()`), so a wake (the
run row with its job id, and the task moved to `running`) is recorded in one step no other writer gets
between, and so is a run's end with what it does to its task and its role's breaker.
"""

from __future__ import annotations

import secrets
import sqlite3
from collections import Counter
from dataclasses import asdict, dataclass
from typing import Any

# A task's states.
TODO, RUNNING, BLOCKED, IN_REVIEW, DONE, FAILED, CANCELLED = (
    "todo",
    "running",
    "blocked",
    "in_review",
    "done",
    "failed",
    "cancelled",
)
TASK_STATES = (TODO, RUNNING, BLOCKED, IN_REVIEW, DONE, FAILED, CANCELLED)
OPEN_TASK_STATES = (TODO, RUNNING, BLOCKED, IN_REVIEW)  # not ended: a person or a job still has to act on it
# Why a task was woken (its run's `reason`).
ASSIGNED, BLOCKERS_RESOLVED, REOPENED, UNBLOCKED = "assigned", "blockers_resolved", "reopened", "unblocked"
# What the agent said of its task when its job completed (`mam event completed --disposition`).
REVIEW = "review"
DISPOSITIONS = (DONE, BLOCKED, REVIEW)  # as mam.protocol declares them for the event
# A run's status.
FIRING, ENDED = "firing", "done"


@dataclass(frozen=True)
class RoleRow:
    name: str
    session: str
    reports_to: str
    daily_runs: int | None  # None: no cap of its own (the workspace's MAM_ORG_DAILY_RUNS still counts)
    breaker: int  # consecutive failed jobs that trip the breaker
    failures: int  # consecutive failed jobs so far (a completed one resets it)
    tripped_at: float | None  # None: the breaker is closed
    created_at: float
    updated_at: float

    @property
    def tripped(self) -> bool:
        return self.tripped_at is not None

    @classmethod
    def from_sql(cls, row: sqlite3.Row) -> RoleRow:
        return cls(**dict(row))


@dataclass(frozen=True)
class TaskRow:
    n: int
    id: str
    title: str
    role: str
    brief: str
    parent: str
    state: str
    wait: str
    wake: str
    note: str
    idempotency_key: str | None
    created_at: float
    updated_at: float
    ended_at: float | None

    @classmethod
    def from_sql(cls, row: sqlite3.Row) -> TaskRow:
        return cls(**dict(row))


@dataclass(frozen=True)
class RunRow:
    n: int
    task: str
    job_id: str
    role: str
    session: str
    reason: str
    day: str
    status: str
    brief: str
    outcome: str
    exit_code: int | None
    detail: str
    disposition: str
    waiting_on: str
    task_state: str
    created_at: float
    ended_at: float | None

    @classmethod
    def from_sql(cls, row: sqlite3.Row) -> RunRow:
        return cls(**dict(row))

    def as_dict(self) -> dict[str, Any]:
        """A wake as `mam task show --json` lists it (its brief is the job's own)."""
        data = asdict(self)
        data.pop("brief")
        data["job"] = data.pop("job_id")
        return data


# -- roles ----------------------------------------------------------------------------------------
def insert_role(conn: sqlite3.Connection, row: RoleRow) -> None:
    """Add a role; sqlite3.IntegrityError if the name is taken."""
    data = asdict(row)
    cols = ",".join(data)
    conn.execute(f"INSERT INTO roles({cols}) VALUES ({','.join('?' * len(data))})", tuple(data.values()))


def role(conn: sqlite3.Connection, name: str) -> RoleRow | None:
    row = conn.execute("SELECT * FROM roles WHERE name=?", (name,)).fetchone()
    return RoleRow.from_sql(row) if row is not None else None


def roles(conn: sqlite3.Connection) -> list[RoleRow]:
    return [RoleRow.from_sql(r) for r in conn.execute("SELECT * FROM roles ORDER BY name")]


def update_role(conn: sqlite3.Connection, name: str, *, now: float, **changes: Any) -> None:
    sets = ",".join(f"{k}=?" for k in changes)
    conn.execute(f"UPDATE roles SET {sets}, updated_at=? WHERE name=?", (*changes.values(), now, name))


def delete_role(conn: sqlite3.Connection, name: str) -> None:
    conn.execute("DELETE FROM roles WHERE name=?", (name,))


def reporting_to(conn: sqlite3.Connection, name: str) -> list[str]:
    return [str(r[0]) for r in conn.execute("SELECT name FROM roles WHERE reports_to=? ORDER BY name", (name,))]


# -- tasks ----------------------------------------------------------------------------------------
def insert_task(
    conn: sqlite3.Connection,
    *,
    title: str,
    role: str,
    brief: str,
    parent: str,
    blocked_by: list[str],
    idempotency_key: str | None,
    now: float,
) -> TaskRow:
    """Add a task in state `todo` (its id `t-<n>`, n its row number) with its blockers; sqlite3.IntegrityError
    if its idempotency key is taken."""
    cur = conn.execute(
        "INSERT INTO tasks(id, title, role, brief, parent, state, wake, idempotency_key, created_at, updated_at) "
        "VALUES (?,?,?,?,?,?,?,?,?,?)",
        ("new-" + secrets.token_hex(8), title, role, brief, parent, TODO, ASSIGNED, idempotency_key, now, now),
    )
    n = int(cur.lastrowid or 0)
    task_id = f"t-{n}"
    conn.execute("UPDATE tasks SET id=? WHERE n=?", (task_id, n))
    conn.executemany(
        "INSERT OR IGNORE INTO task_blockers(task, blocker) VALUES (?,?)", [(task_id, b) for b in blocked_by]
    )
    found = task(conn, task_id)
    assert found is not None
    return found


def task(conn: sqlite3.Connection, task_id: str) -> TaskRow | None:
    row = conn.execute("SELECT * FROM tasks WHERE id=?", (task_id,)).fetchone()
    return TaskRow.from_sql(row) if row is not None else None


def task_by_key(conn: sqlite3.Connection, key: str) -> TaskRow | None:
    row = conn.execute("SELECT * FROM tasks WHERE idempotency_key=?", (key,)).fetchone()
    return TaskRow.from_sql(row) if row is not None else None


def tasks(conn: sqlite3.Connection, *, states: tuple[str, ...] = ()) -> list[TaskRow]:
    """Tasks in creation order (only those in `states`, if given)."""
    if not states:
        return [TaskRow.from_sql(r) for r in conn.execute("SELECT * FROM tasks ORDER BY n")]
    marks = ",".join("?" * len(states))
    rows = conn.execute(f"SELECT * FROM tasks WHERE state IN ({marks}) ORDER BY n", states)
    return [TaskRow.from_sql(r) for r in rows]


def update_task(conn: sqlite3.Connection, task_id: str, *, now: float, **changes: Any) -> None:
    sets = ",".join(f"{k}=?" for k in changes)
    conn.execute(f"UPDATE tasks SET {sets}, updated_at=? WHERE id=?", (*changes.values(), now, task_id))


def any_open_task_of(conn: sqlite3.Connection, role_name: str) -> TaskRow | None:
    marks = ",".join("?" * len(OPEN_TASK_STATES))
    row = conn.execute(
        f"SELECT * FROM tasks WHERE role=? AND state IN ({marks}) ORDER BY n LIMIT 1", (role_name, *OPEN_TASK_STATES)
    ).fetchone()
    return TaskRow.from_sql(row) if row is not None else None


def blockers(conn: sqlite3.Connection, task_ids: list[str] | None = None) -> dict[str, list[str]]:
    """Each task's blockers (of `task_ids`, or of every task), in the order they were given."""
    if task_ids is None:
        rows = conn.execute("SELECT task, blocker FROM task_blockers ORDER BY rowid")
    else:
        marks = ",".join("?" * len(task_ids))
        rows = conn.execute(f"SELECT task, blocker FROM task_blockers WHERE task IN ({marks})", task_ids)
    out: dict[str, list[str]] = {}
    for r in rows:
        out.setdefault(str(r[0]), []).append(str(r[1]))
    return out


def states_of(conn: sqlite3.Connection, task_ids: set[str]) -> dict[str, str]:
    if not task_ids:
        return {}
    ids = sorted(task_ids)
    marks = ",".join("?" * len(ids))
    return {str(r[0]): str(r[1]) for r in conn.execute(f"SELECT id, state FROM tasks WHERE id IN ({marks})", ids)}


# -- runs -----------------------------------------------------------------------------------------
def add_run(
    conn: sqlite3.Connection,
    *,
    task_id: str,
    job_id: str,
    role_name: str,
    session: str,
    reason: str,
    day: str,
    brief: str,
    now: float,
) -> RunRow:
    cur = conn.execute(
        "INSERT INTO task_runs(task, job_id, role, session, reason, day, status, brief, created_at) "
        "VALUES (?,?,?,?,?,?,?,?,?)",
        (task_id, job_id, role_name, session, reason, day, FIRING, brief, now),
    )
    found = run(conn, int(cur.lastrowid or 0))
    assert found is not None
    return found


def run(conn: sqlite3.Connection, n: int) -> RunRow | None:
    row = conn.execute("SELECT * FROM task_runs WHERE n=?", (n,)).fetchone()
    return RunRow.from_sql(row) if row is not None else None


def runs_of(conn: sqlite3.Connection, task_id: str) -> list[RunRow]:
    rows = conn.execute("SELECT * FROM task_runs WHERE task=? ORDER BY n", (task_id,))
    return [RunRow.from_sql(r) for r in rows]


def firing(conn: sqlite3.Connection) -> list[RunRow]:
    """Every run whose job has not been seen to end, oldest first."""
    rows = conn.execute("SELECT * FROM task_runs WHERE status=? ORDER BY n", (FIRING,))
    return [RunRow.from_sql(r) for r in rows]


def recent_runs(conn: sqlite3.Connection, limit: int) -> list[RunRow]:
    rows = conn.execute("SELECT * FROM task_runs ORDER BY n DESC LIMIT ?", (limit,))
    return [RunRow.from_sql(r) for r in reversed(rows.fetchall())]


def set_run(conn: sqlite3.Connection, n: int, **changes: Any) -> None:
    sets = ",".join(f"{k}=?" for k in changes)
    conn.execute(f"UPDATE task_runs SET {sets} WHERE n=?", (*changes.values(), n))


def runs_on(conn: sqlite3.Connection, day: str) -> Counter[str]:
    """The runs each role started on `day` (a local date, YYYY-MM-DD)."""
    rows = conn.execute("SELECT role, COUNT(*) FROM task_runs WHERE day=? GROUP BY role", (day,))
    return Counter({str(r[0]): int(r[1]) for r in rows})


def task_of_job(conn: sqlite3.Connection, job_id: str) -> str:
    """The task whose run `job_id` is ('' : none)."""
    row = conn.execute("SELECT task FROM task_runs WHERE job_id=?", (job_id,)).fetchone()
    return str(row[0]) if row is not None else ""


def task_counts(conn: sqlite3.Connection, role_name: str) -> dict[str, int]:
    """The role's tasks counted by state (a state without a task is absent)."""
    rows = conn.execute("SELECT state, COUNT(*) FROM tasks WHERE role=? GROUP BY state", (role_name,))
    return {str(r[0]): int(r[1]) for r in rows}


def children(conn: sqlite3.Connection, task_id: str) -> list[str]:
    """The ids of the task's subtasks, oldest first."""
    return [str(r[0]) for r in conn.execute("SELECT id FROM tasks WHERE parent=? ORDER BY n", (task_id,))]
