"""Nous Research Hermes Agent (`hermes`): the session id is Hermes's own, discovered afterwards.

Sessions live as rows of `<hermes home>/state.db` (SQLite): `sessions` (id, cwd, started_at in
epoch seconds, parent_session_id, end_reason...) and `messages` keyed by session_id; request
dumps in `<hermes home>/sessions/request_dump_<id>_*.json`. A compressed conversation continues
in a child row whose parent ended with end_reason 'compression'; those rows belong to the same
conversation. The hermes home follows HERMES_HOME and the sticky profile in
`~/.hermes/active_profile` (profiles in `<root>/profiles/<name>/`), as hermes 0.19 resolves it.
"""

from __future__ import annotations

import json
import re
import shlex
import sqlite3
import uuid
from collections.abc import Mapping
from datetime import datetime
from pathlib import Path
from typing import Any

from mam.agents import convo
from mam.agents.base import AgentAdapter, LaunchContext, Noted, SessionOptions
from mam.errors import AgentError

_PROFILE = re.compile(r"^[a-z0-9][a-z0-9_-]{0,63}$")


class HermesAdapter(AgentAdapter):
    name = "hermes"
    command = "hermes"
    verified_version = "0.19.0"
    install_hint = "pipx install --python python3.12 hermes-agent"
    resume_args = ("--resume", "{id}")
    delete_args = ("sessions", "delete", "--yes", "{id}")
    exit_keys = (("text", "/quit"), ("key", "Enter"))
    env_keys = ("HOME", "HERMES_HOME")
    paste_placeholders = ("[Pasted text #",)
    # report: nothing to pass; hermes asks only for commands its DANGEROUS_PATTERNS match, and
    # `mam event ...` matches none (tools/approval.py, 0.19.0).
    full_args = ("--yolo",)
    # ... and its first start with no provider configured: a plain [Y/n] question before any TUI
    # (verified with 0.19.0: a paste + Enter would answer it).
    prompt_markers = (
        "Dangerous Command",
        "Allow for this session",
        "Add to permanent allowlist",
        "Run setup now? [Y/n]",
    )

    def input_box(self, screen: str) -> str:
        return self.framed_box(screen) or ""

    def is_ready(self, screen: str) -> bool:
        return self.framed_box(screen) is not None and self.dialog(screen) is None

    def hermes_home(self, env: Mapping[str, str]) -> Path:
        """The folder hermes uses: a HERMES_HOME that is a profile folder as it is; else the
        profile named in `<root>/active_profile` (root: ~/.hermes, or a HERMES_HOME outside it);
        else HERMES_HOME or ~/.hermes."""
        native = convo.home(env) / ".hermes"
        named = Path(env["HERMES_HOME"]).expanduser() if env.get("HERMES_HOME", "").strip() else None
        if named is not None and named.parent.name == "profiles":
            return named
        root = native if named is None or _inside(named, native) else named
        try:
            active = (root / "active_profile").read_text(encoding="utf-8").strip()
        except (OSError, UnicodeDecodeError):
            active = ""
        if active and active != "default" and _PROFILE.match(active) and (root / "profiles" / active).is_dir():
            return root / "profiles" / active
        return named or native

    def agent_env(self, env: Mapping[str, str]) -> dict[str, str]:
        """Pinned to the hermes home of the launch: a later `hermes profile use` does not move it."""
        return {**super().agent_env(env), "HERMES_HOME": str(self.hermes_home(env))}

    def session_options(self, ctx: LaunchContext) -> SessionOptions:
        """The pane's hermes gets the same pinned HERMES_HOME that mam looks in, and a BASH_ENV of
        this session's own that keeps the pane's PATH in its terminal tool (see keep_path_script)."""
        options = super().session_options(ctx)
        ctx.state_dir.mkdir(mode=0o700, parents=True, exist_ok=True)
        path = ctx.state_dir / BASH_ENV_FILE
        convo.write_private(path, keep_path_script(ctx.env, own=path))
        env = {**options.env, "HERMES_HOME": str(self.hermes_home(ctx.env)), "BASH_ENV": str(path)}
        return SessionOptions(args=options.args, env=env)

    def db(self, env: Mapping[str, str]) -> Path:
        return self.hermes_home(env) / "state.db"

    def discover(self, *, cwd: str, since: float, env: Mapping[str, str]) -> str | None:
        with convo.sqlite_store(self.db(env)) as conn:
            if conn is None or not {"id", "cwd", "started_at"} <= (cols := convo.columns(conn, "sessions")):
                return None
            roots_only = " AND parent_session_id IS NULL" if "parent_session_id" in cols else ""
            rows = conn.execute(
                f"SELECT id, cwd FROM sessions WHERE started_at >= ?{roots_only} ORDER BY started_at, id",
                (since - convo.TOLERANCE_S,),
            ).fetchall()
        return next((str(r["id"]) for r in rows if convo.same_dir(str(r["cwd"] or ""), cwd)), None)

    activity_store = "state.db's `messages` rows of the session"
    # No fork option in 0.19.0; its TUI's /branch copies the conversation to a new session row and switches to
    # it. mam does the same copy from outside (copy_conversation) and resumes it: docs/agents.md, "Forking".
    fork_mode = "copy"

    def fork_id(self) -> str:
        """A session id as hermes makes one (`YYYYMMDD_HHMMSS_<6 hex>`, its /branch's own recipe)."""
        return f"{datetime.now().strftime('%Y%m%d_%H%M%S')}_{uuid.uuid4().hex[:6]}"

    def copy_conversation(self, source_id: str, new_id: str, *, cwd: str, env: Mapping[str, str]) -> list[Path]:
        """What hermes' /branch writes, in one transaction: a session row for `new_id` (the source's, as a
        root: no parent, no title, as titles are unique, not ended) and the source's messages under it, in
        order (hermes' own triggers keep its search index). A compressed conversation (its messages go on
        in a continuation row) is refused. Returns [state.db]."""
        db = self.db(env)
        with convo.sqlite_store(db) as conn:
            if conn is None:
                raise AgentError(f"hermes: no {db}: nothing to fork", conversation_id=source_id)
            try:
                conn.execute("BEGIN IMMEDIATE")
                row = conn.execute("SELECT * FROM sessions WHERE id = ?", (source_id,)).fetchone()
                if row is None or row["end_reason"] == "compression":
                    why = "not found" if row is None else "compressed (it goes on in another session row)"
                    raise AgentError(f"hermes: session {source_id} {why}: not forked", conversation_id=source_id)
                values = {**dict(row), "id": new_id, "parent_session_id": None, "title": None}
                values.update(ended_at=None, end_reason=None)
                names = ", ".join(f'"{k}"' for k in values)
                conn.execute(
                    f"INSERT INTO sessions ({names}) VALUES ({', '.join('?' * len(values))})", list(values.values())
                )
                cols = [
                    str(r[1]) for r in conn.execute('PRAGMA table_info("messages")') if r[1] not in ("id", "session_id")
                ]
                listed = ", ".join(f'"{c}"' for c in cols)
                conn.execute(
                    f"INSERT INTO messages (session_id, {listed}) SELECT ?, {listed} FROM messages "
                    "WHERE session_id = ? ORDER BY id",
                    (new_id, source_id),
                )
                conn.commit()
            except BaseException:
                conn.rollback()
                raise
        return [db]

    def read_activity(
        self, conversation_id: str, *, cwd: str, env: Mapping[str, str], cursor: dict[str, object]
    ) -> list[Noted] | None:
        """The session's `messages` rows of state.db after the last `id` read (0.19.0 writes each as it
        comes, `timestamp` in epoch seconds): a user message (working), an assistant message asking for
        tools (working, a tool call open: its permission prompt is recorded nowhere, so
        mam.hooks.store_watch looks at the pane), a tool result (working), an assistant message asking
        for none (the turn's end)."""
        last = cursor.get("id", 0)
        assert isinstance(last, int)
        with convo.sqlite_store(self.db(env)) as conn:
            if conn is None or not {"id", "session_id", "role", "tool_calls", "timestamp"} <= convo.columns(
                conn, "messages"
            ):
                return []
            rows = conn.execute(
                "SELECT id, role, tool_calls, timestamp FROM messages WHERE session_id = ? AND id > ? ORDER BY id",
                (conversation_id, last),
            ).fetchall()
        out = []
        for row in rows:
            cursor["id"] = int(row["id"])
            at, role = float(row["timestamp"] or 0.0), str(row["role"] or "")
            calls = _tool_calls(row["tool_calls"])
            if role == "user":
                out.append(Noted(convo.turn_began(cursor, at), "working", "user-message"))
            elif role == "tool":
                out.append(Noted(at, "working", "tool-result"))
            elif role == "assistant" and calls:
                out.append(Noted(at, "working", "assistant-tool-calls", tool=calls[0], tool_open=True))
            elif role == "assistant":
                out.append(Noted(at, "idle", "assistant-final", turn_end=True, begun=convo.turn_began(cursor)))
        return out

    def conversation_files(self, conversation_id: str, *, cwd: str, env: Mapping[str, str]) -> list[Path]:
        """The session's own files beside state.db: transcript snapshots and request dumps."""
        convo.check_id(self.name, conversation_id)
        folder = self.hermes_home(env) / "sessions"
        own = [folder / f"{conversation_id}.json", folder / f"{conversation_id}.jsonl"]
        return own + sorted(folder.glob(f"request_dump_{conversation_id}_*.json"))

    def conversation_exists(self, conversation_id: str, *, cwd: str, env: Mapping[str, str]) -> bool:
        """A row in state.db. Checked before every resume: hermes 0.19 given an unknown id says
        "Session not found" and then starts a new session under that id instead of failing."""
        with convo.sqlite_store(self.db(env)) as conn:
            return convo.has_row(conn, "sessions", conversation_id)

    def purge_conversation(self, conversation_id: str, *, cwd: str, env: Mapping[str, str]) -> list[Path]:
        """`hermes sessions delete --yes <id>`, then the compression continuations it keeps, every
        row keyed by their session_id, and their files; returns [state.db] if rows went, and the files."""
        db = self.db(env)
        lineage = [convo.check_id(self.name, conversation_id)]
        with convo.sqlite_store(db) as conn:
            if conn is not None:
                lineage = self._lineage(conn, conversation_id)
        ran = self.run_delete_command(conversation_id, cwd=cwd, env=env)
        count = 0
        with convo.sqlite_store(db) as conn:
            if conn is not None:
                try:
                    count = convo.delete_sessions(conn, lineage, table="sessions")
                except sqlite3.Error as e:
                    raise AgentError(
                        f"hermes: could not delete conversation {conversation_id} from {db} ({e}); "
                        f"try `hermes sessions delete {conversation_id}`",
                        conversation_id=conversation_id,
                    ) from e
        files = convo.remove([f for i in lineage for f in self.conversation_files(i, cwd=cwd, env=env)])
        return ([db] if count or ran else []) + files

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


BASH_ENV_FILE = "hermes-bash-env.sh"


def keep_path_script(env: Mapping[str, str], *, own: Path) -> str:
    """What bash runs at each start in the pane's hermes. Hermes 0.19's `terminal` tool takes its
    environment from a `bash -l` snapshot (tools/environments/base.py), and a login shell's
    /etc/profile resets PATH, so the workspace venv (and `mam`) would be missing there. bash reads
    BASH_ENV after the profile files even with -l; this puts the pane's PATH back in front (once:
    a nested bash finds it there already), after running a BASH_ENV the pane had of its own."""
    lines = ["# Written by mam for one hermes session: bash -l resets PATH; this keeps the pane's PATH first."]
    previous = env.get("BASH_ENV", "").strip()
    if previous and Path(previous).expanduser() != own:
        lines.append(f"[ -r {shlex.quote(previous)} ] && . {shlex.quote(previous)}")
    if not env.get("PATH"):
        return "\n".join(lines) + "\n"
    lines += [
        f"__mam_keep={shlex.quote(env['PATH'])}",
        'case ":$PATH:" in',
        '  ":$__mam_keep:"*) ;;',
        '  *) PATH="$__mam_keep${PATH:+:$PATH}" ;;',
        "esac",
        "export PATH",
        "unset __mam_keep",
    ]
    return "\n".join(lines) + "\n"


def _tool_calls(text: Any) -> list[str]:
    """The tool calls an assistant message asks for, as `terminal(<command>)` (OpenAI shape: a JSON list of
    `{"function": {"name", "arguments"}}`)."""
    try:
        calls = json.loads(text) if text else []
    except ValueError:
        return []
    out = []
    for call in calls if isinstance(calls, list) else []:
        fn = call.get("function") if isinstance(call, dict) else None
        if not isinstance(fn, dict):
            continue
        try:
            args = json.loads(fn.get("arguments") or "{}")
        except (ValueError, TypeError):
            args = {}
        command = args.get("command") if isinstance(args, dict) else None
        name = str(fn.get("name") or "tool")
        out.append(f"{name}({' '.join(str(command).split())[:200]})" if command else name)
    return out


def _inside(path: Path, folder: Path) -> bool:
    try:
        path.resolve().relative_to(folder.resolve())
    except ValueError:
        return False
    return True


ADAPTER = HermesAdapter()
