"""The registry facade: one Database per workspace plus the YAML mirror kept in step with it.

The sessions table and the mirror are imported on first use: `mam event`, which runs once per
agent event, only touches jobs and events.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from contextlib import AbstractContextManager, contextmanager
from typing import Any

from mam.store import jobs as jobs_table
from mam.store import mirror
from mam.store import sessions as sessions_table
from mam.store.db import Database
from mam.store.sessions import OrchestratorRow, SessionRow
from mam.util.flock import FileLock
from mam.workspace import Workspace


class Registry:
    """The truth about sessions, jobs and events of one workspace."""

    def __init__(self, ws: Workspace) -> None:
        self.ws = ws
        ws.ensure_state()
        self.db = Database(ws.db_path)

    @classmethod
    def open_existing(cls, ws: Workspace) -> Registry | None:
        """The registry if the workspace has one; None otherwise (creates nothing)."""
        return cls(ws) if ws.db_path.exists() else None

    def close(self) -> None:
        self.db.close()

    # -- transactions ---------------------------------------------------------------------------
    @contextmanager
    def write(self, *, sessions: bool = False) -> Iterator[sqlite3.Connection]:
        """A write transaction; with `sessions=True` the YAML mirror is refreshed after the commit."""
        with self.db.transaction() as conn:
            yield conn
            if sessions:
                sessions_table.bump_generation(conn)
        if sessions:
            self.refresh_mirror()

    def read(self) -> AbstractContextManager[sqlite3.Connection]:
        return self.db.read()

    def refresh_mirror(self, *, force: bool = False) -> bool:
        """Rewrite the YAML mirror if it is older than the database; True if it was written."""

        with FileLock(str(self.ws.lock("mirror"))):
            with self.db.read() as conn:
                generation = sessions_table.generation(conn)
                rows = [r.as_dict() for r in sessions_table.list_all(conn)]
            if not force and mirror.read_generation(self.ws.mirror_path) >= generation:
                return False
            mirror.write(self.ws.mirror_path, generation, rows)
            return True

    # -- sessions -------------------------------------------------------------------------------
    def add_session(self, row: SessionRow) -> SessionRow:
        with self.write(sessions=True) as conn:
            return sessions_table.insert(conn, row)

    def update_session(self, name: str, **changes: Any) -> SessionRow:
        with self.write(sessions=True) as conn:
            return sessions_table.update(conn, name, **changes)

    def delete_session(self, name: str) -> None:
        with self.write(sessions=True) as conn:
            sessions_table.delete(conn, name)

    def session(self, name: str) -> SessionRow:
        with self.read() as conn:
            return sessions_table.get(conn, name)

    def find_session(self, name: str) -> SessionRow | None:
        with self.read() as conn:
            return sessions_table.find(conn, name)

    def sessions(self) -> list[SessionRow]:
        with self.read() as conn:
            return sessions_table.list_all(conn)

    def orchestrators(self) -> list[OrchestratorRow]:
        with self.read() as conn:
            return sessions_table.orchestrators(conn)

    # -- jobs -----------------------------------------------------------------------------------
    def job(self, job_id: str) -> jobs_table.JobRow:
        with self.read() as conn:
            return jobs_table.get(conn, job_id)

    def find_job(self, job_id: str) -> jobs_table.JobRow | None:
        with self.read() as conn:
            return jobs_table.find(conn, job_id)

    def events_after(self, job_id: str, seq: int = 0) -> list[jobs_table.EventRow]:
        with self.read() as conn:
            return jobs_table.events_after(conn, job_id, seq)
