"""The on-disk conversation stores of the fake agent CLIs, shaped like the real ones.

Each store writes where its real CLI does (under the HOME and overrides in the environment
it is given) and in the same shape, reduced to what mam reads: file and folder names, the
records that carry the id, the cwd and the start time, and one record per turn.
Standard library only: the fakes run as separate programs. See docs/agents.md.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import secrets
import sqlite3
import string
import time
import uuid
from collections.abc import Mapping
from datetime import datetime, timezone
from pathlib import Path
from urllib.parse import quote


def iso(at: float) -> str:
    return datetime.fromtimestamp(at, timezone.utc).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def append_json(path: Path, record: dict) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "a", encoding="utf-8") as f:
        f.write(json.dumps(record) + "\n")


def write_json(path: Path, value: object) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    tmp.write_text(json.dumps(value, indent=2), encoding="utf-8")
    os.replace(tmp, path)


def uuid7(at: float) -> str:
    """A UUIDv7 (48-bit millisecond time, version 7, random rest), as Codex ids are."""
    value = (int(at * 1000) << 80) | secrets.randbits(80)
    value = (value & ~(0xF << 76)) | (0x7 << 76)
    value = (value & ~(0x3 << 62)) | (0x2 << 62)
    return str(uuid.UUID(int=value))


def fake_usage(reply: str) -> dict[str, int]:
    """The usage a fake model message reports: derived from its text, so a test can recompute it."""
    n = len(reply)
    return {"input_tokens": 100 + n, "output_tokens": n, "cache_read_input_tokens": 7, "cache_creation_input_tokens": 3}


class Store:
    """One CLI's conversation store, seen from one cwd. Times are explicit so tests can backdate."""

    def __init__(self, env: Mapping[str, str], cwd: str) -> None:
        self.env = env
        self.cwd = cwd
        self.home = Path(env.get("HOME") or os.path.expanduser("~"))

    def dir_from(self, key: str, default: Path) -> Path:
        value = self.env.get(key)
        return Path(value) if value else default

    def new_id(self, started: float) -> str:
        return str(uuid.uuid4())

    def exists(self, cid: str) -> bool:
        raise NotImplementedError

    def create(self, cid: str, started: float) -> None:
        raise NotImplementedError

    def add_turn(self, cid: str, role: str, text: str, at: float) -> None:
        raise NotImplementedError

    def finish(self, cid: str, at: float) -> None:
        """Mark the conversation closed (when the real store records that)."""

    def delete(self, cid: str) -> None:
        """What the CLI's own delete command removes (only the CLIs that have one)."""
        raise NotImplementedError

    def discard(self, cid: str) -> None:
        """Remove a conversation that never had a turn (gemini, on exit)."""
        raise NotImplementedError


class Claude(Store):
    def path(self, cid: str) -> Path:
        """This cwd's transcript, or the one of that id in another folder: claude 2.1.332 resumes
        a session id from any folder (and appends to the transcript where it is)."""
        root = self.dir_from("CLAUDE_CONFIG_DIR", self.home / ".claude")
        here = root / "projects" / re.sub(r"[^A-Za-z0-9-]", "-", self.cwd) / f"{cid}.jsonl"
        found = sorted((root / "projects").glob(f"*/{cid}.jsonl")) if not here.exists() else []
        return found[0] if found else here

    def exists(self, cid: str) -> bool:
        return self.path(cid).is_file()

    def create(self, cid: str, started: float) -> None:
        self.path(cid).parent.mkdir(parents=True, exist_ok=True)
        self.path(cid).touch()

    def add_turn(self, cid: str, role: str, text: str, at: float) -> None:
        record = {"type": role, "sessionId": cid, "cwd": self.cwd, "timestamp": iso(at), "uuid": str(uuid.uuid4())}
        if role != "assistant":
            append_json(self.path(cid), {**record, "message": {"role": role, "content": text}})
            return
        # As claude 2.1.332 writes a model message: one line per content block, each with the
        # message's id and its whole usage (a reader counts it once per id).
        message = {"id": f"msg_fake_{uuid.uuid4().hex[:20]}", "role": role, "usage": fake_usage(text)}
        for block in ({"type": "text", "text": text}, {"type": "text", "text": ""}):
            append_json(
                self.path(cid), {**record, "uuid": str(uuid.uuid4()), "message": {**message, "content": [block]}}
            )


class Codex(Store):
    def root(self) -> Path:
        return self.dir_from("CODEX_HOME", self.home / ".codex")

    def new_id(self, started: float) -> str:
        return uuid7(started)

    def find(self, cid: str) -> Path | None:
        found = sorted(self.root().glob(f"sessions/*/*/*/rollout-*-{cid}.jsonl"))
        return found[0] if found else None

    def exists(self, cid: str) -> bool:
        return self.find(cid) is not None

    def state(self) -> sqlite3.Connection:
        """Codex 0.171's index: state_5.sqlite (threads, thread_spawn_edges), reduced."""
        self.root().mkdir(parents=True, exist_ok=True)
        conn = sqlite3.connect(self.root() / "state_5.sqlite", timeout=5.0)
        conn.execute("PRAGMA journal_mode = WAL")
        conn.executescript(
            "CREATE TABLE IF NOT EXISTS threads (id TEXT PRIMARY KEY, rollout_path TEXT NOT NULL, created_at INTEGER "
            "NOT NULL,"
            " updated_at INTEGER NOT NULL, source TEXT NOT NULL, cwd TEXT NOT NULL, title TEXT NOT NULL, "
            "first_user_message TEXT);"
            "CREATE TABLE IF NOT EXISTS thread_spawn_edges (parent_thread_id TEXT NOT NULL, child_thread_id TEXT NOT "
            "NULL PRIMARY KEY,"
            " status TEXT NOT NULL);"
        )
        return conn

    def create(self, cid: str, started: float, *, parent: str | None = None) -> None:
        local = time.localtime(started)
        path = (
            self.root()
            / "sessions"
            / time.strftime("%Y/%m/%d", local)
            / f"rollout-{time.strftime('%Y-%m-%dT%H-%M-%S', local)}-{cid}.jsonl"
        )
        # As 0.171 writes it: a user's session has source "cli"; a subagent's names its parent.
        source: object = {"subagent": {"thread_spawn": {"parent_thread_id": parent, "depth": 1}}} if parent else "cli"
        meta = {
            "session_id": cid,
            "id": cid,
            "timestamp": iso(started),
            "cwd": self.cwd,
            "originator": "codex-tui",
            "cli_version": "0.0.0-fake",
            "source": source,
            "thread_source": "subagent" if parent else "user",
        }
        append_json(path, {"timestamp": iso(started), "ordinal": 0, "type": "session_meta", "payload": meta})
        conn = self.state()
        with conn:
            conn.execute(
                "INSERT INTO threads (id, rollout_path, created_at, updated_at, source, cwd, title) VALUES (?, ?, ?, "
                "?, ?, ?, '')",
                (cid, str(path), int(started), int(started), json.dumps(source) if parent else "cli", self.cwd),
            )
            if parent:
                conn.execute("INSERT INTO thread_spawn_edges VALUES (?, ?, 'open')", (parent, cid))
        conn.close()

    def task(self, cid: str, kind: str, at: float) -> None:
        """`task_started` / `task_complete`: a turn's bounds in the rollout, as 0.171 writes them."""
        path = self.find(cid)
        if path is not None:
            append_json(path, {"timestamp": iso(at), "type": "event_msg", "payload": {"type": kind}})

    def token_count(self, cid: str, reply: str, at: float) -> None:
        """0.171's `token_count` after a response (its tool calls run first): running totals."""
        path = self.find(cid)
        if path is None:
            return
        u = fake_usage(reply)
        last = {
            "input_tokens": u["input_tokens"],
            "cached_input_tokens": u["cache_read_input_tokens"],
            "cache_write_input_tokens": u["cache_creation_input_tokens"],
            "output_tokens": u["output_tokens"],
            "reasoning_output_tokens": 0,
            "total_tokens": u["input_tokens"] + u["output_tokens"],
        }
        total = dict(last)
        for line in path.read_text(encoding="utf-8").splitlines():
            payload = json.loads(line).get("payload") or {}
            if payload.get("type") == "token_count":
                previous = payload["info"]["total_token_usage"]
                total = {k: previous[k] + last[k] for k in last}
        info = {"total_token_usage": total, "last_token_usage": last, "model_context_window": 258400}
        append_json(path, {"timestamp": iso(at), "type": "event_msg", "payload": {"type": "token_count", "info": info}})

    def add_turn(self, cid: str, role: str, text: str, at: float) -> None:
        kind = "user_message" if role == "user" else "agent_message"
        path = self.find(cid)
        assert path is not None, cid
        append_json(path, {"timestamp": iso(at), "type": "event_msg", "payload": {"type": kind, "message": text}})
        if role == "user":  # the prompt history of every session, and the index's title
            append_json(self.root() / "history.jsonl", {"session_id": cid, "ts": int(at), "text": text})
            conn = self.state()
            with conn:
                conn.execute(
                    "UPDATE threads SET title = ?, first_user_message = COALESCE(first_user_message, ?) WHERE id = ?",
                    (text, text, cid),
                )
            conn.close()

    def delete(self, cid: str) -> None:
        """`codex delete --force <id>` in 0.171: the rollout and the index row; history.jsonl stays."""
        for path in self.root().glob(f"sessions/*/*/*/rollout-*-{cid}.jsonl*"):
            path.unlink()
        conn = self.state()
        with conn:
            conn.execute("DELETE FROM threads WHERE id = ?", (cid,))
        conn.close()


class Agy(Store):
    def root(self) -> Path:
        return self.dir_from("ANTIGRAVITY_CLI_HOME", self.home / ".gemini" / "antigravity-cli")

    def db(self, cid: str) -> Path:
        return self.root() / "conversations" / f"{cid}.db"

    def exists(self, cid: str) -> bool:
        return self.db(cid).is_file()

    def create(self, cid: str, started: float) -> None:
        self.db(cid).parent.mkdir(parents=True, exist_ok=True)
        conn = sqlite3.connect(self.db(cid))
        with conn:
            conn.execute(
                "CREATE TABLE steps (idx INTEGER PRIMARY KEY, step_type TEXT, status TEXT,"
                " metadata BLOB, step_payload BLOB, step_format TEXT)"
            )
        conn.close()
        (self.root() / "brain" / cid / ".system_generated" / "logs").mkdir(parents=True, exist_ok=True)

    def add_turn(self, cid: str, role: str, text: str, at: float) -> None:
        step = "USER_INPUT" if role == "user" else "PLANNER_RESPONSE"
        conn = sqlite3.connect(self.db(cid))
        with conn:
            conn.execute(
                "INSERT INTO steps (step_type, status, step_payload, step_format) VALUES (?, 'DONE', ?, 'fake')",
                (step, text.encode()),
            )
        conn.close()
        append_json(
            self.root() / "brain" / cid / ".system_generated" / "logs" / "transcript.jsonl",
            {"type": step, "content": text},
        )
        # agy remembers the latest conversation of each cwd (what `agy --continue` resumes).
        latest_path = self.root() / "cache" / "last_conversations.json"
        try:
            latest = json.loads(latest_path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            latest = {}
        if latest.get(self.cwd) != cid:
            write_json(latest_path, {**latest, self.cwd: cid})


class Sqlite(Store):
    """A store that is one SQLite file shared by every conversation."""

    schema = ""
    sessions = "session"  # the table holding one row per conversation

    def db(self) -> Path:
        raise NotImplementedError

    def connect(self) -> sqlite3.Connection:
        self.db().parent.mkdir(parents=True, exist_ok=True)
        conn = sqlite3.connect(self.db(), timeout=5.0)
        conn.execute("PRAGMA journal_mode = WAL")
        conn.executescript(self.schema)
        return conn

    def write(self, sql: str, args: tuple) -> None:
        conn = self.connect()
        with conn:
            conn.execute(sql, args)
        conn.close()

    def exists(self, cid: str) -> bool:
        if not self.db().is_file():
            return False
        conn = self.connect()
        row = conn.execute(f"SELECT 1 FROM {self.sessions} WHERE id = ?", (cid,)).fetchone()
        conn.close()
        return row is not None


class Hermes(Sqlite):
    sessions = "sessions"
    schema = """
    CREATE TABLE IF NOT EXISTS sessions (id TEXT PRIMARY KEY, source TEXT NOT NULL, model TEXT, parent_session_id TEXT,
        started_at REAL NOT NULL, ended_at REAL, end_reason TEXT, message_count INTEGER DEFAULT 0, cwd TEXT, title TEXT,
        FOREIGN KEY (parent_session_id) REFERENCES sessions(id));
    CREATE TABLE IF NOT EXISTS messages (id INTEGER PRIMARY KEY AUTOINCREMENT,
        session_id TEXT NOT NULL REFERENCES sessions(id),
        role TEXT NOT NULL, content TEXT, timestamp REAL NOT NULL);
    CREATE TABLE IF NOT EXISTS session_model_usage (session_id TEXT NOT NULL REFERENCES sessions(id) ON DELETE CASCADE,
        model TEXT NOT NULL, api_call_count INTEGER NOT NULL DEFAULT 0, PRIMARY KEY (session_id, model));
    CREATE TABLE IF NOT EXISTS state_meta (key TEXT PRIMARY KEY, value TEXT);
    """

    def hermes_home(self) -> Path:
        """As hermes 0.19: a HERMES_HOME that is a profile folder; else the sticky profile named in
        <root>/active_profile (root: ~/.hermes, or a HERMES_HOME outside it); else HERMES_HOME."""
        native, named = self.home / ".hermes", self.env.get("HERMES_HOME")
        if named and Path(named).parent.name == "profiles":
            return Path(named)
        root = Path(named) if named and not str(Path(named).resolve()).startswith(str(native.resolve())) else native
        active = (root / "active_profile").read_text().strip() if (root / "active_profile").is_file() else ""
        if active and active != "default":
            return root / "profiles" / active
        return Path(named) if named else native

    def db(self) -> Path:
        return self.hermes_home() / "state.db"

    def dump_request(self, cid: str, at: float, body: str) -> Path:
        """What hermes writes on an API error: the whole request, brief included."""
        stamp = time.strftime("%Y%m%d_%H%M%S", time.localtime(at)) + f"_{int(at * 1e6) % 1000000:06d}"
        path = self.hermes_home() / "sessions" / f"request_dump_{cid}_{stamp}.json"
        write_json(path, {"session_id": cid, "request": {"body": body}})
        return path

    def delete(self, cid: str) -> None:
        """`hermes sessions delete --yes <id>` in 0.19: the row, its messages, its files; children
        (compression continuations included) are orphaned, not deleted."""
        conn = self.connect()
        with conn:
            conn.execute("DELETE FROM messages WHERE session_id = ?", (cid,))
            conn.execute("DELETE FROM session_model_usage WHERE session_id = ?", (cid,))
            conn.execute("UPDATE sessions SET parent_session_id = NULL WHERE parent_session_id = ?", (cid,))
            conn.execute("DELETE FROM sessions WHERE id = ?", (cid,))
        conn.close()
        folder = self.hermes_home() / "sessions"
        for path in [folder / f"{cid}.json", folder / f"{cid}.jsonl", *folder.glob(f"request_dump_{cid}_*.json")]:
            path.unlink(missing_ok=True)

    def new_id(self, started: float) -> str:
        return f"{time.strftime('%Y%m%d_%H%M%S', time.localtime(started))}_{secrets.token_hex(3)}"

    def create(self, cid: str, started: float, *, parent: str | None = None) -> None:
        self.write(
            "INSERT INTO sessions (id, source, model, parent_session_id, started_at, cwd) VALUES (?, 'cli', 'fake', "
            "?, ?, ?)",
            (cid, parent, started, self.cwd),
        )

    def add_turn(self, cid: str, role: str, text: str, at: float) -> None:
        self.write(
            "INSERT INTO messages (session_id, role, content, timestamp) VALUES (?, ?, ?, ?)", (cid, role, text, at)
        )
        self.write(
            "INSERT INTO session_model_usage (session_id, model, api_call_count) VALUES (?, 'fake', 1) "
            "ON CONFLICT (session_id, model) DO UPDATE SET api_call_count = api_call_count + 1",
            (cid,),
        )

    def finish(self, cid: str, at: float, reason: str = "cli_close") -> None:
        self.write("UPDATE sessions SET ended_at = ?, end_reason = ? WHERE id = ?", (at, reason, cid))


class Opencode(Sqlite):
    schema = """
    CREATE TABLE IF NOT EXISTS project (id TEXT PRIMARY KEY, worktree TEXT NOT NULL,
        time_created INTEGER NOT NULL, time_updated INTEGER NOT NULL);
    CREATE TABLE IF NOT EXISTS session (id TEXT PRIMARY KEY,
        project_id TEXT NOT NULL REFERENCES project(id) ON DELETE CASCADE,
        parent_id TEXT, slug TEXT NOT NULL, directory TEXT NOT NULL, title TEXT NOT NULL, version TEXT NOT NULL,
        time_created INTEGER NOT NULL, time_updated INTEGER NOT NULL);
    CREATE TABLE IF NOT EXISTS message (id TEXT PRIMARY KEY,
        session_id TEXT NOT NULL REFERENCES session(id) ON DELETE CASCADE,
        time_created INTEGER NOT NULL, time_updated INTEGER NOT NULL, data TEXT NOT NULL);
    CREATE TABLE IF NOT EXISTS part (id TEXT PRIMARY KEY,
        message_id TEXT NOT NULL REFERENCES message(id) ON DELETE CASCADE,
        session_id TEXT NOT NULL, time_created INTEGER NOT NULL, time_updated INTEGER NOT NULL, data TEXT NOT NULL);
    CREATE TABLE IF NOT EXISTS event_sequence (aggregate_id TEXT PRIMARY KEY, seq INTEGER NOT NULL, owner_id TEXT);
    CREATE TABLE IF NOT EXISTS event (id TEXT PRIMARY KEY,
        aggregate_id TEXT NOT NULL REFERENCES event_sequence(aggregate_id)
        ON DELETE CASCADE, seq INTEGER NOT NULL, type TEXT NOT NULL, data TEXT NOT NULL);
    """

    def data_dir(self) -> Path:
        return self.dir_from("XDG_DATA_HOME", self.home / ".local" / "share") / "opencode"

    def db(self) -> Path:
        named = self.env.get("OPENCODE_DB")
        return (self.data_dir() / named) if named else self.data_dir() / "opencode.db"

    @staticmethod
    def ident(prefix: str, at: float) -> str:
        tail = "".join(secrets.choice(string.ascii_letters + string.digits) for _ in range(14))
        return f"{prefix}_{int(at * 1000):012x}{tail}"

    def new_id(self, started: float) -> str:
        return self.ident("ses", started)

    def create(self, cid: str, started: float, *, parent: str | None = None) -> None:
        ms = int(started * 1000)
        self.write(
            "INSERT OR IGNORE INTO project (id, worktree, time_created, time_updated) VALUES ('global', '/', ?, ?)",
            (ms, ms),
        )
        self.write(
            "INSERT INTO session (id, project_id, parent_id, slug, directory, title, version, time_created, "
            "time_updated) "
            "VALUES (?, 'global', ?, ?, ?, 'New session', '0.0.0-fake', ?, ?)",
            (cid, parent, cid[-8:], self.cwd, ms, ms),
        )
        write_json(self.data_dir() / "storage" / "session_diff" / f"{cid}.json", [])

    def add_turn(self, cid: str, role: str, text: str, at: float) -> None:
        ms, message = int(at * 1000), self.ident("msg", at)
        self.write(
            "INSERT INTO message (id, session_id, time_created, time_updated, data) VALUES (?, ?, ?, ?, ?)",
            (message, cid, ms, ms, json.dumps({"role": role})),
        )
        parts: list[dict[str, object]] = [{"type": "text", "text": text}]
        if role == "assistant":  # one model step, its usage on the step-finish part, as 1.18.33 records it
            u = fake_usage(text)
            tokens = {
                "input": u["input_tokens"],
                "output": u["output_tokens"],
                "reasoning": 0,
                "cache": {"read": u["cache_read_input_tokens"], "write": u["cache_creation_input_tokens"]},
            }
            parts = [{"type": "step-start"}, *parts, {"type": "step-finish", "reason": "stop", "tokens": tokens}]
        for part in parts:
            self.write(
                "INSERT INTO part (id, message_id, session_id, time_created, time_updated, data)"
                " VALUES (?, ?, ?, ?, ?, ?)",
                (self.ident("prt", at), message, cid, ms, ms, json.dumps(part)),
            )
        # 1.18 also logs every change as an event keyed by aggregate_id (= the session id).
        self.write(
            "INSERT INTO event_sequence (aggregate_id, seq) VALUES (?, 1) ON CONFLICT (aggregate_id) DO UPDATE SET "
            "seq = seq + 1",
            (cid,),
        )
        self.write(
            "INSERT INTO event (id, aggregate_id, seq, type, data) VALUES (?, ?, (SELECT seq FROM event_sequence "
            "WHERE aggregate_id = ?),"
            " 'message.part.updated.1', ?)",
            (self.ident("evt", at), cid, cid, json.dumps({"sessionID": cid, "part": {"type": "text", "text": text}})),
        )

    def delete(self, cid: str) -> None:
        """`opencode session delete <id>` in 1.18.33: the session, its messages, parts and events."""
        conn = self.connect()
        with conn:
            for table in ("part", "message"):
                conn.execute(f"DELETE FROM {table} WHERE session_id = ?", (cid,))
            conn.execute("DELETE FROM event WHERE aggregate_id = ?", (cid,))
            conn.execute("DELETE FROM event_sequence WHERE aggregate_id = ?", (cid,))
            conn.execute("DELETE FROM session WHERE id = ?", (cid,))
        conn.close()


class Grok(Store):
    def sessions(self) -> Path:
        return self.dir_from("GROK_HOME", self.home / ".grok") / "sessions"

    def folder(self, cid: str) -> Path:
        found = [p for p in self.sessions().glob(f"*/{cid}") if p.is_dir()]
        return found[0] if found else self.sessions() / quote(self.cwd, safe="") / cid

    def exists(self, cid: str) -> bool:
        return (self.folder(cid) / "summary.json").is_file()

    def create(self, cid: str, started: float) -> None:
        write_json(
            self.folder(cid) / "summary.json", {"id": cid, "cwd": self.cwd, "created_at": iso(started), "title": ""}
        )

    def add_turn(self, cid: str, role: str, text: str, at: float) -> None:
        append_json(self.folder(cid) / "chat_history.jsonl", {"type": role, "content": text})
        chunk = "user_message_chunk" if role == "user" else "agent_message_chunk"
        append_json(
            self.folder(cid) / "updates.jsonl",
            {"sessionUpdate": chunk, "content": {"type": "text", "text": text}, "timestamp": iso(at)},
        )


class Gemini(Store):
    """Gemini CLI 0.61.0: ~/.gemini (or $GEMINI_CLI_HOME/.gemini), a temp folder per project."""

    def root(self) -> Path:
        return Path(self.env.get("GEMINI_CLI_HOME") or self.home) / ".gemini"

    def project(self, *, register: bool = False) -> Path:
        """tmp/<name>/, the name registered for the cwd in projects.json (the folder's base name)."""
        registry = self.root() / "projects.json"
        projects = json.loads(registry.read_text())["projects"] if registry.is_file() else {}
        name = projects.get(self.cwd)
        if name is None:
            taken, base = (
                set(projects.values()),
                re.sub(r"[^a-z0-9-]", "-", os.path.basename(self.cwd).lower()) or "project",
            )
            name = next(
                f"{base}-{n}" if n else base
                for n in range(len(taken) + 1)
                if (f"{base}-{n}" if n else base) not in taken
            )
            if register:
                write_json(registry, {"projects": {**projects, self.cwd: name}})
                (self.root() / "tmp" / name).mkdir(parents=True, exist_ok=True)
                (self.root() / "tmp" / name / ".project_root").write_text(self.cwd)
        return self.root() / "tmp" / name

    def transcript(self, cid: str) -> Path | None:
        for path in sorted((self.project() / "chats").glob(f"session-*-{cid[:8]}.jsonl")):
            with open(path, encoding="utf-8") as f:
                if json.loads(f.readline()).get("sessionId") == cid:
                    return path
        return None

    def exists(self, cid: str) -> bool:
        return self.transcript(cid) is not None  # only in this cwd's project, like gemini

    def create(self, cid: str, started: float) -> None:
        stamp = time.strftime("%Y-%m-%dT%H-%M", time.localtime(started))
        path = self.project(register=True) / "chats" / f"session-{stamp}-{cid[:8]}.jsonl"
        digest = hashlib.sha256(self.cwd.encode()).hexdigest()
        head = {
            "sessionId": cid,
            "projectHash": digest,
            "startTime": iso(started),
            "lastUpdated": iso(started),
            "kind": "main",
        }
        append_json(path, head)
        logs = self.project() / "logs.json"
        if not logs.exists():
            write_json(logs, [])

    def add_turn(self, cid: str, role: str, text: str, at: float) -> None:
        path = self.transcript(cid)
        assert path is not None, cid
        kind = "user" if role == "user" else "gemini"
        append_json(path, {"id": uuid.uuid4().hex, "timestamp": iso(at), "type": kind, "content": [{"text": text}]})
        if role == "user":  # the project's prompt log, shared by its sessions
            logs = self.project() / "logs.json"
            entries = json.loads(logs.read_text()) if logs.exists() else []
            mine = sum(1 for e in entries if e.get("sessionId") == cid)
            write_json(
                logs,
                [
                    *entries,
                    {"sessionId": cid, "messageId": mine, "type": "user", "message": text, "timestamp": iso(at)},
                ],
            )

    def discard(self, cid: str) -> None:
        path = self.transcript(cid)
        if path is not None:
            path.unlink()


STORES: dict[str, type[Store]] = {
    "claude": Claude,
    "codex": Codex,
    "agy": Agy,
    "hermes": Hermes,
    "grok": Grok,
    "opencode": Opencode,
    "gemini": Gemini,
}
