"""opencode (`opencode`): the session id (`ses_...`) is opencode's own, discovered afterwards.

Current versions keep every session as rows of one SQLite file,
`${XDG_DATA_HOME:-~/.local/share}/opencode/opencode.db` (OPENCODE_DB overrides it): table
`session` (id, parent_id, directory, time_created in epoch milliseconds...) and tables keyed
by session_id (message, part, todo...). A session's diff may also sit in
`storage/session_diff/<id>.json`. Child sessions (subagent tasks) have parent_id set.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Mapping
from pathlib import Path

from mam.agents import convo
from mam.agents.base import REPORT_COMMAND, AgentAdapter, LaunchContext, SessionOptions
from mam.errors import AgentError


class OpencodeAdapter(AgentAdapter):
    name = "opencode"
    command = "opencode"
    resume_args = ("--session", "{id}")
    # The default app_exit binding `<leader>q` (leader ctrl+x): the /exit command is missing
    # from some 1.x releases, and ctrl+c only clears a non-empty input box.
    exit_keys = (("key", "C-x"), ("key", "q"))
    env_keys = ("HOME", "XDG_DATA_HOME", "OPENCODE_DB")
    paste_placeholders = ("[Pasted ~",)
    full_args = ("--auto",)

    def report_options(self, ctx: LaunchContext) -> SessionOptions:
        """One bash allow rule, given as the highest-precedence config layer (OPENCODE_CONFIG_CONTENT,
        merged over the user's own config, which stays as it is)."""
        import json

        rule = {"permission": {"bash": {f"{REPORT_COMMAND} *": "allow"}}}
        return SessionOptions(env={"OPENCODE_CONFIG_CONTENT": json.dumps(rule)})

    def input_box(self, screen: str) -> str:
        """The `┃` bar lines right above the box's bottom edge (`╹▀▀▀`); the transcript's messages
        use the same bar but are never joined to that edge."""
        lines = screen.rstrip("\n").splitlines()
        edges = [i for i, line in enumerate(lines) if line.strip().startswith("\u2579\u2580")]
        if not edges:
            return ""
        box: list[str] = []
        for line in reversed(lines[: edges[-1]]):
            if not line.strip().startswith("\u2503"):
                break
            box.insert(0, line)
        return "\n".join(box)

    def is_ready(self, screen: str) -> bool:
        return bool(self.input_box(screen)) and self.dialog(screen) is None

    def data_dir(self, env: Mapping[str, str]) -> Path:
        return convo.xdg_data_home(env) / "opencode"

    def db(self, env: Mapping[str, str]) -> Path:
        named = env.get("OPENCODE_DB")
        if named:
            path = Path(named).expanduser()
            return path if path.is_absolute() else self.data_dir(env) / path
        return self.data_dir(env) / "opencode.db"

    def discover(self, *, cwd: str, since: float, env: Mapping[str, str]) -> str | None:
        with convo.sqlite_store(self.db(env)) as conn:
            if conn is None or not {"id", "directory", "time_created"} <= (cols := convo.columns(conn, "session")):
                return None
            roots_only = " AND parent_id IS NULL" if "parent_id" in cols else ""
            rows = conn.execute(
                f"SELECT id, directory FROM session WHERE time_created >= ?{roots_only} ORDER BY time_created, id",
                (int((since - convo.TOLERANCE_S) * 1000),),
            ).fetchall()
        return next((str(r["id"]) for r in rows if convo.same_dir(str(r["directory"] or ""), cwd)), None)

    def conversation_files(self, conversation_id: str, *, cwd: str, env: Mapping[str, str]) -> list[Path]:
        convo.check_id(self.name, conversation_id)
        return [self.data_dir(env) / "storage" / "session_diff" / f"{conversation_id}.json"]

    def conversation_exists(self, conversation_id: str, *, cwd: str, env: Mapping[str, str]) -> bool:
        with convo.sqlite_store(self.db(env)) as conn:
            return convo.has_row(conn, "session", conversation_id)

    def purge_conversation(self, conversation_id: str, *, cwd: str, env: Mapping[str, str]) -> list[Path]:
        """Delete the session's rows and its child sessions' rows, then its diff files.
        Returns the paths touched: opencode.db (if rows went) and the files removed."""
        db = self.db(env)
        ids = [convo.check_id(self.name, conversation_id)]
        count = 0
        with convo.sqlite_store(db) as conn:
            if conn is not None:
                try:
                    ids = self._family(conn, conversation_id)
                    count = convo.delete_sessions(conn, ids, table="session")
                except sqlite3.Error as e:
                    raise AgentError(f"opencode: could not delete session {conversation_id} from {db}: {e}") from e
        files = [f for i in ids for f in self.conversation_files(i, cwd=cwd, env=env)]
        return ([db] if count else []) + convo.remove(files)

    @staticmethod
    def _family(conn: sqlite3.Connection, conversation_id: str) -> list[str]:
        ids, todo = [conversation_id], [conversation_id]
        if "parent_id" not in convo.columns(conn, "session"):
            return ids
        while todo:
            rows = conn.execute("SELECT id FROM session WHERE parent_id = ?", (todo.pop(),))
            children = [str(r["id"]) for r in rows if str(r["id"]) not in ids]
            ids += children
            todo += children
        return ids


ADAPTER = OpencodeAdapter()
