"""opencode (`opencode`): the session id (`ses_...`) is opencode's own, discovered afterwards.

Current versions keep every session as rows of one SQLite file,
`${XDG_DATA_HOME:-~/.local/share}/opencode/opencode.db` (OPENCODE_DB overrides it): table
`session` (id, parent_id, directory, time_created in epoch milliseconds...) and tables keyed
by session_id (message, part, todo...). A session's diff may also sit in
`storage/session_diff/<id>.json`. Child sessions (subagent tasks) have parent_id set.
"""

from __future__ import annotations

import json
import sqlite3
import time
from collections.abc import Mapping
from dataclasses import replace
from pathlib import Path
from typing import Any

from mam.agents import convo, opencode_server
from mam.agents.base import AgentAdapter, LaunchContext, Noted, SessionOptions
from mam.agents.channel import Outcome
from mam.errors import AgentError


class OpencodeAdapter(AgentAdapter):
    name = "opencode"
    command = "opencode"
    verified_version = "1.18.33"
    install_hint = "npm install -g opencode-ai"
    resume_args = ("--session", "{id}")
    # 1.18.33's `--session ID --fork` ("fork the session when continuing") writes the fork to opencode.db
    # ("<title> (fork #1)", a root session) but its TUI stays on the home screen, where a typed prompt starts
    # a new, empty session. mam finds the fork's id as a new session's (discover) and its briefs go through
    # the TUI's server to that session (mam.agents.opencode_server): docs/agents.md, "Forking".
    fork_mode = "native"
    fork_args = ("--session", "{id}", "--fork")
    delete_args = ("session", "delete", "{id}")
    # The default app_exit binding `<leader>q` (leader ctrl+x): the /exit command is missing
    # from some 1.x releases, and ctrl+c only clears a non-empty input box.
    exit_keys = (("key", "C-x"), ("key", "q"))
    # One Escape only asks to press it again; apart, so the second is not read as an Alt chord.
    interrupt_keys = (("key", "Escape"), ("pause", "0.3"), ("key", "Escape"))
    env_keys = ("HOME", "XDG_DATA_HOME", "OPENCODE_DB")
    paste_placeholders = ("[Pasted ~",)
    full_args = ("--auto",)
    prompt_markers = ("Permission required", "Allow once   Allow always   Reject")

    def session_options(self, ctx: LaunchContext) -> SessionOptions:
        """The base options plus the delivery channel: opencode's own server on a free loopback port,
        behind a fresh secret (mam.agents.opencode_server)."""
        options = super().session_options(ctx)
        args, env = opencode_server.launch_options(opencode_server.open_channel(ctx.state_dir))
        return SessionOptions(args=(*options.args, *args), env={**options.env, **env})

    def deliver_through_channel(
        self, state_dir: Path, text: str, conversation_id: str | None, cwd: str
    ) -> Outcome | None:
        channel = opencode_server.read_channel(state_dir)
        return None if channel is None else opencode_server.deliver(channel, text, conversation_id)

    def report_options(self, ctx: LaunchContext) -> SessionOptions:
        """One bash allow rule, given as the highest-precedence config layer (OPENCODE_CONFIG_CONTENT).

        Checked with 1.18.33: that layer's `bash` object *replaces* a `bash` string of the user's
        config ("ask" became allow-all), so the user's own bash setting is carried in as its "*"
        rule. A user config mam cannot read, or a `permission` given as one string for every
        tool, gets no rule at all (then `mam event` asks, as with --permissions ask)."""

        current = self._user_bash_permission(ctx)
        if current is None:
            return SessionOptions()
        bash = {"*": current} if isinstance(current, str) else dict(current)
        for command in ctx.allowed_commands:
            bash.pop(f"{command} *", None)
            bash[f"{command} *"] = "allow"  # last: the most specific rule is the one that matches
        # The user's own OPENCODE_CONFIG_CONTENT, if any, is kept: the rule goes into it.
        layer = json.loads(ctx.env.get("OPENCODE_CONFIG_CONTENT") or "{}")
        layer.setdefault("permission", {})["bash"] = bash
        return SessionOptions(env={"OPENCODE_CONFIG_CONTENT": json.dumps(layer)})

    def _user_bash_permission(self, ctx: LaunchContext) -> str | dict[str, str] | None:
        """The user's effective `permission.bash` ("allow" when none is set, opencode's default),
        or None when it cannot be known or is not a bash setting of its own."""

        config_home = convo.env_dir(ctx.env, "XDG_CONFIG_HOME", convo.home(ctx.env) / ".config") / "opencode"
        layers = [config_home / "config.json", config_home / "opencode.json", config_home / "opencode.jsonc"]
        if ctx.env.get("OPENCODE_CONFIG"):
            layers.append(Path(ctx.env["OPENCODE_CONFIG"]))
        layers += [Path(ctx.cwd) / "opencode.json", Path(ctx.cwd) / "opencode.jsonc"]
        texts = [p.read_text(encoding="utf-8") for p in layers if p.is_file()]
        if ctx.env.get("OPENCODE_CONFIG_CONTENT"):
            texts.append(ctx.env["OPENCODE_CONFIG_CONTENT"])
        bash: str | dict[str, str] = "allow"
        for text in texts:
            try:
                config = json.loads(text)
            except ValueError:
                return None  # JSONC comments or a broken file: do not guess
            permission = config.get("permission") if isinstance(config, dict) else None
            if permission is None:
                continue
            if not isinstance(permission, dict):
                return None  # one setting for every tool: a bash object would replace it
            value = permission.get("bash")
            if isinstance(value, str):
                bash = value
            elif isinstance(value, dict):
                bash = {
                    **({"*": bash} if isinstance(bash, str) else bash),
                    **{str(k): str(v) for k, v in value.items()},
                }
        return bash

    def input_box(self, screen: str) -> str:
        """The `┃` bar lines right above the box's bottom edge (`╹▀▀▀`); the transcript's messages
        use the same bar but are never joined to that edge."""
        lines = screen.rstrip("\n").splitlines()
        edges = [i for i, line in enumerate(lines) if line.strip().startswith("\u2579\u2580")]
        if not edges:
            return ""
        edge = lines[edges[-1]]
        width = len(edge.rstrip()) - (
            len(edge) - len(edge.lstrip())
        )  # what shows right of it (the folder) is not the box's
        box: list[str] = []
        for line in reversed(lines[: edges[-1]]):
            if not line.strip().startswith("\u2503"):
                break
            start = len(line) - len(line.lstrip())
            box.insert(0, line[start : start + width])
        return "\n".join(box)

    def is_ready(self, screen: str) -> bool:
        return bool(self.input_box(screen)) and self.dialog(screen) is None

    def input_empty(self, screen: str) -> bool:
        """The box holds no text of the user's: its last line names the agent and the model (`Build ·
        <model>`), and an empty box of a fresh start shows a placeholder (`Ask anything… "<a tip>"`)."""
        lines = [line.strip().lstrip("\u2503").strip() for line in self.input_box(screen).splitlines()]
        if not lines:
            return False
        text = [t for t in lines if t]
        if text and " \u00b7 " in text[-1]:
            text.pop()
        return all(t.startswith("Ask anything") for t in text)

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
        """`opencode session delete <id>`, then what is left of the session and its child sessions:
        rows keyed by session_id, the `event` / `event_sequence` rows keyed by aggregate_id (they
        hold the whole conversation, brief included), and the diff files.
        Returns the paths touched: opencode.db (if rows went) and the files removed."""
        db = self.db(env)
        ids = [convo.check_id(self.name, conversation_id)]
        with convo.sqlite_store(db) as conn:
            if conn is not None:
                ids = self._family(conn, conversation_id)
        ran = self.run_delete_command(conversation_id, cwd=cwd, env=env)
        count = 0
        with convo.sqlite_store(db) as conn:
            if conn is not None:
                try:
                    count = convo.delete_sessions(conn, ids, table="session", keys=_EVENT_KEYS)
                except sqlite3.Error as e:
                    raise AgentError(f"opencode: could not delete session {conversation_id} from {db}: {e}") from e
        files = [f for i in ids for f in self.conversation_files(i, cwd=cwd, env=env)]
        return ([db] if count or ran else []) + convo.remove(files)

    activity_store = "opencode.db's `event` log of the session"

    def read_activity(
        self, conversation_id: str, *, cwd: str, env: Mapping[str, str], cursor: dict[str, object]
    ) -> list[Noted] | None:
        """The session's rows of opencode.db's `event` log (1.18.33: every change of a message or a part is
        one row, `seq` rising per session), after the last `seq` read: a user message (working), a tool
        part pending or running (working, a tool call open: its permission prompt is recorded nowhere, so
        mam.hooks.store_watch looks at the pane) or ended, an assistant message completed with a `finish`
        other than `tool-calls` (the turn's end)."""
        seq = cursor.get("seq", -1)
        seen = cursor.setdefault("seen", set())
        users = cursor.setdefault("users", {})
        assert isinstance(seq, int) and isinstance(seen, set) and isinstance(users, dict)
        with convo.sqlite_store(self.db(env)) as conn:
            if conn is None or not {"aggregate_id", "seq", "type", "data"} <= convo.columns(conn, "event"):
                return []
            rows = conn.execute(
                "SELECT seq, type, data FROM event WHERE aggregate_id = ? AND seq > ? ORDER BY seq LIMIT 2000",
                (conversation_id, seq),
            ).fetchall()
        out: list[Noted] = []
        for row in rows:
            cursor["seq"] = int(row["seq"])
            try:
                data = json.loads(row["data"] or "{}")
            except ValueError:
                continue
            noted = _noted(str(row["type"] or ""), data, seen, users) if isinstance(data, dict) else None
            if noted is not None:
                noted = noted if noted.at else replace(noted, at=out[-1].at if out else time.time())
                out.append(noted)
        return out

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


def _noted(kind: str, data: dict[str, Any], seen: set[tuple[str, str]], users: dict[str, float]) -> Noted | None:
    """One `event` row as activity (None: nothing mam uses). `seen`: the messages already counted, as a
    message is updated again after it is written (its summary, its parts' totals); `users`: when each user
    message read was written. A turn's end has begun when the user message it answers (its `parentID`) was
    written: a brief handed over while opencode still finishes the turn before has opencode write that turn's
    end after the claim, and it is not the new job's."""
    if kind.startswith("message.updated."):
        info = _obj(data.get("info"))
        times = _obj(info.get("time"))
        role, ident = info.get("role"), str(info.get("id") or "")
        if role == "user" and ("user", ident) not in seen:
            seen.add(("user", ident))
            users[ident] = _at(times.get("created"))
            return Noted(users[ident], "working", "user-message")
        ended = times.get("completed") or info.get("error")
        if role == "assistant" and ended and info.get("finish") != "tool-calls" and ("end", ident) not in seen:
            seen.add(("end", ident))
            begun = users.get(str(info.get("parentID") or "")) or _at(times.get("created"))
            return Noted(_at(times.get("completed")), "idle", "assistant-finished", turn_end=True, begun=begun)
        return None
    if kind.startswith("message.part.updated."):
        part = _obj(data.get("part"))
        state = _obj(part.get("state"))
        status = str(state.get("status") or "")
        if part.get("type") != "tool" or status not in ("pending", "running", "completed", "error"):
            return None
        times = _obj(state.get("time"))
        tool = _tool(part.get("tool"), state.get("input"))
        if status in ("pending", "running"):
            return Noted(_at(times.get("start")), "working", f"tool-{status}", tool=tool, tool_open=True)
        return Noted(_at(times.get("end")), "working", f"tool-{status}", tool=tool)
    return None


def _obj(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def _at(ms: Any) -> float:
    """opencode's epoch milliseconds as seconds (0.0 when it gave none: the record before it counts)."""
    return ms / 1000 if isinstance(ms, int | float) and not isinstance(ms, bool) and ms > 0 else 0.0


def _tool(name: Any, given: Any) -> str:
    """`bash(touch x)`: the tool and its command (or file), on one line."""
    arg = ""
    if isinstance(given, dict):
        arg = next((str(given[k]) for k in ("command", "filePath", "path", "url") if given.get(k)), "")
    arg = " ".join(arg.split())[:200]
    return f"{name}({arg})" if arg else str(name or "")


# The event log of a session is keyed by aggregate_id (= the session id), not session_id.
_EVENT_KEYS = {"event": "aggregate_id", "event_sequence": "aggregate_id"}

ADAPTER = OpencodeAdapter()
