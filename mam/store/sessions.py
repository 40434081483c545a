"""Session rows: the registry's record of each agent session and of the orchestrator's own pane."""

from __future__ import annotations

import json
import sqlite3
import time
from dataclasses import asdict, dataclass, field, fields
from enum import Enum
from typing import Any

from mam.errors import SessionError, SessionNotFound


class SessionStatus(str, Enum):
    STARTING = "starting"  # the agent is being launched
    RUNNING = "running"
    STOPPED = "stopped"  # its agent exited on request; resumable
    TERMINATED = "terminated"  # its pane or agent is gone

    def __str__(self) -> str:
        return self.value


LIVE: frozenset[SessionStatus] = frozenset({SessionStatus.RUNNING, SessionStatus.STARTING})  # a pane is expected


@dataclass
class SessionRow:
    name: str
    agent: str
    role: str
    backend: str
    server: str
    cwd: str
    status: SessionStatus = SessionStatus.STARTING
    pane_id: str | None = None
    pane_pid: int | None = None
    conversation_id: str | None = None
    resumable: bool = False
    agent_env: dict[str, str] = field(default_factory=dict)
    note: str = ""
    launched_at: float | None = None
    created_at: float = 0.0
    updated_at: float = 0.0
    ready_at: float | None = None  # the agent of the current launch showed it was ready (None: not seen yet)
    permissions: str = "report"  # ask / report / full: what the agent may do without a prompt (kept on resume)
    token_budget: int = 0  # --token-budget: tokens its jobs may spend in all (0: no budget of its own)
    board: bool = False  # --board: the agent may also run `mam board ...` without a prompt (kept on resume)
    worktree: str = ""  # --worktree: the session's own git worktree ('' : none)
    branch: str = ""  # the worktree's branch
    base: str = ""  # the ref the branch was made from, as given (--base, default HEAD)
    base_commit: str = ""  # that ref as a commit, when the branch was made
    host: str = ""  # the host the session's agent runs on
    forked_from: str = ""  # `mam session fork`: the session whose conversation this one started from
    stopped_by_pause: str = ""  # the job whose hard pause stopped its agent: its next delegation relaunches it
    socket: str = ""  # the absolute path of its server's socket when its pane was made ('' : a row made before)

    def __post_init__(self) -> None:
        self.status = SessionStatus(self.status)  # a row read back from SQL or a mirror holds the plain string

    @property
    def ready(self) -> bool:
        return self.ready_at is not None and self.launched_at is not None and self.ready_at >= self.launched_at

    def as_dict(self) -> dict[str, Any]:
        return {**asdict(self), "status": self.status.value}  # plain text for JSON, YAML and SQL

    @classmethod
    def from_sql(cls, row: sqlite3.Row) -> SessionRow:
        data = dict(row)
        data["resumable"] = bool(data["resumable"])
        data["board"] = bool(data.get("board", 0))
        data["agent_env"] = json.loads(data["agent_env"] or "{}")
        return cls(**data)


_COLUMNS = [f.name for f in fields(SessionRow)]


def _to_sql(value: Any) -> Any:
    if isinstance(value, dict):
        return json.dumps(value, sort_keys=True)
    if isinstance(value, bool):
        return int(value)
    return value


def insert(conn: sqlite3.Connection, row: SessionRow) -> SessionRow:
    now = time.time()
    row.created_at = row.created_at or now
    row.updated_at = now
    values = [_to_sql(getattr(row, c)) for c in _COLUMNS]
    try:
        conn.execute(f"INSERT INTO sessions ({','.join(_COLUMNS)}) VALUES ({','.join('?' * len(_COLUMNS))})", values)
    except sqlite3.IntegrityError as e:
        raise SessionError(f"a session named {row.name!r} already exists", session=row.name) from e
    return row


def update(conn: sqlite3.Connection, name: str, **changes: Any) -> SessionRow:
    unknown = set(changes) - set(_COLUMNS) - {"name"}
    if unknown:
        raise ValueError(f"unknown session fields: {sorted(unknown)}")
    changes["updated_at"] = time.time()
    assignments = ", ".join(f"{k}=?" for k in changes)
    cur = conn.execute(
        f"UPDATE sessions SET {assignments} WHERE name=?", [*(_to_sql(v) for v in changes.values()), name]
    )
    if cur.rowcount == 0:
        raise SessionNotFound(f"no session named {name!r} in the registry", session=name)
    return get(conn, name)


def get(conn: sqlite3.Connection, name: str) -> SessionRow:
    row = conn.execute("SELECT * FROM sessions WHERE name=?", (name,)).fetchone()
    if row is None:
        raise SessionNotFound(f"no session named {name!r} in the registry", session=name)
    return SessionRow.from_sql(row)


def find(conn: sqlite3.Connection, name: str) -> SessionRow | None:
    row = conn.execute("SELECT * FROM sessions WHERE name=?", (name,)).fetchone()
    return SessionRow.from_sql(row) if row is not None else None


def list_all(conn: sqlite3.Connection) -> list[SessionRow]:
    return [SessionRow.from_sql(r) for r in conn.execute("SELECT * FROM sessions ORDER BY created_at, name")]


def delete(conn: sqlite3.Connection, name: str) -> None:
    conn.execute("DELETE FROM sessions WHERE name=?", (name,))


def bump_generation(conn: sqlite3.Connection) -> int:
    conn.execute("UPDATE meta SET value = CAST(value AS INTEGER) + 1 WHERE key='sessions_gen'")
    return generation(conn)


def set_generation(conn: sqlite3.Connection, generation: int) -> None:
    conn.execute("UPDATE meta SET value = ? WHERE key='sessions_gen'", (str(generation),))


def generation(conn: sqlite3.Connection) -> int:
    row = conn.execute("SELECT value FROM meta WHERE key='sessions_gen'").fetchone()
    return int(row[0]) if row else 0


# -- the orchestrator's own panes ---------------------------------------------------------------
@dataclass(frozen=True)
class OrchestratorRow:
    key: str
    backend: str
    server: str
    pane_id: str
    session: str
    pid: int | None
    recorded_at: float


def record_orchestrator(conn: sqlite3.Connection, row: OrchestratorRow) -> None:
    conn.execute(
        "INSERT OR REPLACE INTO orchestrators(key, backend, server, pane_id, session, pid, recorded_at) VALUES "
        "(?,?,?,?,?,?,?)",
        (row.key, row.backend, row.server, row.pane_id, row.session, row.pid, row.recorded_at),
    )


def orchestrators(conn: sqlite3.Connection) -> list[OrchestratorRow]:
    return [OrchestratorRow(**dict(r)) for r in conn.execute("SELECT * FROM orchestrators ORDER BY recorded_at")]
