"""Nous Research Hermes Agent (`hermes`): the session id is Hermes's own, discovered afterwards.

Sessions live as rows of `${HERMES_HOME:-~/.hermes}/state.db` (SQLite): `sessions` (id,
cwd, started_at in epoch seconds, parent_session_id, end_reason...) and `messages` keyed by
session_id. A compressed conversation continues in a child row whose parent ended with
end_reason 'compression'; those rows belong to the same conversation.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Mapping
from pathlib import Path

from mam.agents import convo
from mam.agents.base import AgentAdapter
from mam.errors import AgentError


class HermesAdapter(AgentAdapter):
    name = "hermes"
    command = "hermes"
    resume_args = ("--resume", "{id}")
    exit_keys = (("text", "/quit"), ("key", "Enter"))
    env_keys = ("HOME", "HERMES_HOME")
    paste_placeholders = ("[Pasted text #",)
    # report: nothing to pass; hermes asks only for commands its DANGEROUS_PATTERNS match, and
    # `mam event ...` matches none (tools/approval.py, 0.19.0).
    full_args = ("--yolo",)
    prompt_markers = ("Dangerous Command", "Allow for this session", "Add to permanent allowlist")

    def input_box(self, screen: str) -> str:
        return self.framed_box(screen) or ""

    def is_ready(self, screen: str) -> bool:
        return self.framed_box(screen) is not None and self.dialog(screen) is None

    def db(self, env: Mapping[str, str]) -> Path:
        return convo.env_dir(env, "HERMES_HOME", convo.home(env) / ".hermes") / "state.db"

    def discover(self, *, cwd: str, since: float, env: Mapping[str, str]) -> str | None:
        with convo.sqlite_store(self.db(env)) as conn:
            if conn is None or not {"id", "cwd", "started_at"} <= (cols := convo.columns(conn, "sessions")):
                return None
            roots_only = " AND parent_session_id IS NULL" if "parent_session_id" in cols else ""
            rows = conn.execute(
                f"SELECT id, cwd FROM sessions WHERE started_at >= ?{roots_only} ORDER BY started_at, id", (since - convo.TOLERANCE_S,)
            ).fetchall()
        return next((str(r["id"]) for r in rows if convo.same_dir(str(r["cwd"] or ""), cwd)), None)

    def conversation_files(self, conversation_id: str, *, cwd: str, env: Mapping[str, str]) -> list[Path]:
        return []  # rows of the shared state.db, never a file of their own

    def conversation_exists(self, conversation_id: str, *, cwd: str, env: Mapping[str, str]) -> bool:
        with convo.sqlite_store(self.db(env)) as conn:
            return convo.has_row(conn, "sessions", conversation_id)

    def purge_conversation(self, conversation_id: str, *, cwd: str, env: Mapping[str, str]) -> list[Path]:
        """Delete the conversation's rows (and its compression continuations); return [state.db] if any went."""
        db = self.db(env)
        with convo.sqlite_store(db) as conn:
            if conn is None:
                return []
            try:
                count = convo.delete_sessions(conn, self._lineage(conn, conversation_id), table="sessions")
            except sqlite3.Error as e:
                raise AgentError(
                    f"hermes: could not delete conversation {conversation_id} from {db} ({e}); "
                    f"try `hermes sessions delete {conversation_id}`",
                    conversation_id=conversation_id,
                ) from e
        return [db] if count else []

    @staticmethod
    def _lineage(conn: sqlite3.Connection, conversation_id: str) -> list[str]:
        ids, todo = [conversation_id], [conversation_id]
        has_reason = "end_reason" in convo.columns(conn, "sessions")
        while todo and has_reason:
            current = todo.pop()
            row = conn.execute("SELECT end_reason FROM sessions WHERE id = ?", (current,)).fetchone()
            if row is None or row["end_reason"] != "compression":
                continue
            rows = conn.execute("SELECT id FROM sessions WHERE parent_session_id = ?", (current,))
            children = [str(r["id"]) for r in rows if str(r["id"]) not in ids]
            ids += children
            todo += children
        return ids


ADAPTER = HermesAdapter()
