"""Forks made by copying a conversation (`fork_mode = "copy"`): gemini's transcripts under the new id, hermes'
rows as its /branch writes them, on stores shaped as gemini 0.61.0 and hermes 0.19.0 write them
(tests/real/test_gemini.py and test_hermes.py resume such copies)."""

from __future__ import annotations

import hashlib
import json
import sqlite3
from pathlib import Path

import pytest

from mam.agents import get_adapter
from mam.errors import AgentError

SRC = "fcce0aee-f97f-43fd-85a3-9c34990303d7"
NEW = "230c5e95-2a40-4527-b208-a7832c891289"


def transcript(home: Path, cwd: str, name: str, lines: list[str]) -> Path:
    chats = home / ".gemini" / "tmp" / "proj" / "chats"
    chats.mkdir(parents=True, exist_ok=True)
    path = chats / name
    path.write_text("".join(line + "\n" for line in lines), encoding="utf-8")
    return path


def test_the_copy_names_the_new_id_and_keeps_every_other_line(tmp_path: Path) -> None:
    cwd = str(tmp_path / "repo")
    head = {"sessionId": SRC, "projectHash": hashlib.sha256(cwd.encode()).hexdigest(), "startTime": "x", "kind": "main"}
    message = '{"id":"m1","type":"user","content":[{"text":"brief \\u00e9 ' + SRC + '"}]}'
    lines = [json.dumps(head, separators=(",", ":")), message, '{"$set":{"sessionId":"' + SRC + '"}}', "{half"]
    source = transcript(tmp_path, cwd, f"session-2026-12-06T11-07-{SRC[:8]}.jsonl", lines)
    env = {"HOME": str(tmp_path)}
    written = get_adapter("gemini").copy_conversation(SRC, NEW, cwd=cwd, env=env)
    assert written == [source.with_name(f"session-2026-12-06T11-07-{NEW[:8]}.jsonl")]
    copied = written[0].read_text(encoding="utf-8").splitlines()
    assert json.loads(copied[0]) == {**head, "sessionId": NEW}
    assert copied[1:] == [message, "{half"]  # the resume marker left out, the rest byte for byte
    assert written[0].stat().st_mode & 0o777 == 0o600
    assert source.read_text(encoding="utf-8").splitlines() == lines  # the source untouched
    assert get_adapter("gemini").conversation_exists(NEW, cwd=cwd, env=env)
    with pytest.raises(FileExistsError):  # never over an existing file
        get_adapter("gemini").copy_conversation(SRC, NEW, cwd=cwd, env=env)


def hermes_db(home: Path) -> Path:
    db = home / "state.db"
    conn = sqlite3.connect(db)
    conn.executescript(
        "CREATE TABLE sessions (id TEXT PRIMARY KEY, source TEXT, parent_session_id TEXT, started_at REAL, "
        "ended_at REAL, end_reason TEXT, cwd TEXT, title TEXT, input_tokens INTEGER);"
        "CREATE UNIQUE INDEX t ON sessions(title) WHERE title IS NOT NULL;"
        "CREATE TABLE messages (id INTEGER PRIMARY KEY AUTOINCREMENT, session_id TEXT, role TEXT, content TEXT, "
        "timestamp REAL);"
        "INSERT INTO sessions VALUES ('20261206_100000_aaaaaa', 'cli', NULL, 5.0, NULL, NULL, '/r', 'Title', 9);"
        "INSERT INTO sessions VALUES ('20261206_100000_cccccc', 'cli', NULL, 5.0, 6.0, 'compression', '/r', NULL, 0);"
        "INSERT INTO messages (session_id, role, content, timestamp) VALUES "
        "('20261206_100000_aaaaaa', 'user', 'brief', 6.0), ('20261206_100000_bbbbbb', 'user', 'other', 6.5), "
        "('20261206_100000_aaaaaa', 'assistant', 'done', 7.0);"
    )
    conn.commit()
    conn.close()
    return db


def test_a_hermes_fork_is_its_branch_copy_as_a_root_row(tmp_path: Path) -> None:
    home = tmp_path / ".hermes"
    home.mkdir()
    db = hermes_db(home)
    env = {"HOME": str(tmp_path), "HERMES_HOME": str(home)}
    adapter = get_adapter("hermes")
    new = adapter.fork_id()
    assert new is not None and len(new) == 22 and new[8] == "_" and new[15] == "_"
    assert adapter.copy_conversation("20261206_100000_aaaaaa", new, cwd="/r", env=env) == [db]
    conn = sqlite3.connect(db)
    row = conn.execute(
        "SELECT parent_session_id, title, started_at, cwd, input_tokens FROM sessions WHERE id = ?", (new,)
    )
    assert row.fetchone() == (None, None, 5.0, "/r", 9)
    msgs = conn.execute("SELECT role, content, timestamp FROM messages WHERE session_id = ? ORDER BY id", (new,))
    assert msgs.fetchall() == [("user", "brief", 6.0), ("assistant", "done", 7.0)]
    conn.close()
    with pytest.raises(AgentError, match="compressed"):
        adapter.copy_conversation("20261206_100000_cccccc", adapter.fork_id() or "", cwd="/r", env=env)
