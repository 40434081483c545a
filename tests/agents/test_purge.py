"""Existence, resumability and purge: exactly one conversation's files or rows, nothing else."""

from __future__ import annotations

import json
import re
import sqlite3
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from mam.agents import get_adapter
from mam.errors import AgentError
from tests.agents.conftest import AGENTS, seed, tree
from tests.fakes.fake_stores import Gemini, Hermes, Opencode

SQLITE_STORES = {"hermes": ("state.db", "sessions"), "opencode": ("opencode.db", "session")}


def rows(db: Path, table: str, cid: str) -> int:
    with sqlite3.connect(db) as conn:
        key = "id" if table in ("sessions", "session") else "session_id"
        return int(conn.execute(f"SELECT COUNT(*) FROM {table} WHERE {key} = ?", (cid,)).fetchone()[0])


def extras(agent: str, env: dict[str, str], cwd: str, cid: str, text: str) -> None:
    """The files beside the store that the real CLIs write for a session and a purge must take too."""
    home = Path(env["HOME"])
    if agent == "claude":  # claude 2.1.332
        root = home / ".claude"
        for folder in (root / "tasks" / cid, root / "session-env" / cid, root / "file-history" / cid):
            folder.mkdir(parents=True)
            (folder / "1.json").write_text(json.dumps({"text": text}))
    elif agent == "hermes":  # hermes 0.19.0, on an API error
        Hermes(env, cwd).dump_request(cid, time.time(), text)
    elif agent == "gemini":  # gemini 0.61.0 per-session extras in the project's temp folder
        project = Gemini(env, cwd).project()
        (project / "logs").mkdir(exist_ok=True)
        (project / "logs" / f"session-{cid}.jsonl").write_text(json.dumps({"text": text}) + "\n")
        (project / "tool-outputs" / f"session-{cid}").mkdir(parents=True)
        (project / "tool-outputs" / f"session-{cid}" / "out.txt").write_text(text)


def sql_dump(path: Path) -> list[str]:
    with sqlite3.connect(f"file:{path}?mode=ro", uri=True) as conn:
        return list(conn.iterdump())


@pytest.mark.parametrize("agent", AGENTS)
def test_purge_removes_one_conversation_and_keeps_the_others(
    agent: str, agent_env: dict[str, str], folders: Callable[[str], str]
) -> None:
    """Nothing of the purged conversation is left in any file (not even as bytes in a SQLite
    page), and every other conversation and file is as it was."""
    adapter = get_adapter(agent)
    a, b = folders("a"), folders("b")
    now = time.time()
    keep_same_cwd = seed(agent, agent_env, a, now - 60, text="keep me KEEP-1")
    keep_other_cwd = seed(agent, agent_env, b, now - 30, text="keep me KEEP-2")
    doomed = seed(agent, agent_env, a, now, text="purge me DOOMED-BRIEF")
    for cid, text in ((keep_same_cwd, "KEEP-1"), (keep_other_cwd, "KEEP-2"), (doomed, "DOOMED-BRIEF")):
        extras(agent, agent_env, a if cid != keep_other_cwd else b, cid, text)
    home = Path(agent_env["HOME"])
    before = tree(home)
    dumps = {name: sql_dump(home / name) for name, data in before.items() if data.startswith(b"SQLite format 3")}
    assert adapter.conversation_exists(doomed, cwd=a, env=agent_env)
    adapter.check_resumable(doomed, cwd=a, env=agent_env)

    removed = adapter.purge_conversation(doomed, cwd=a, env=agent_env)

    assert removed
    assert not adapter.conversation_exists(doomed, cwd=a, env=agent_env)
    assert adapter.conversation_exists(keep_same_cwd, cwd=a, env=agent_env)
    assert adapter.conversation_exists(keep_other_cwd, cwd=b, env=agent_env)
    after = tree(home)
    # Nothing of it remains: no file named for it, no byte of its brief anywhere.
    assert not [name for name in after if doomed in name or f"-{doomed[:8]}." in name]
    assert not [name for name, data in after.items() if b"DOOMED-BRIEF" in data or doomed.encode() in data]
    # Everything else is as it was: files byte for byte, shared stores minus that conversation.
    for name, data in before.items():
        if doomed in name or f"-{doomed[:8]}." in name or name.endswith(("-wal", "-shm")):
            continue
        if name in dumps:
            assert sql_dump(home / name) == [line for line in dumps[name] if doomed not in line], name
        elif b"DOOMED-BRIEF" in data or doomed.encode() in data:
            # A shared file (a prompt log, an index, a cwd map): what it held of the others stays.
            others = [k.encode() for k in (keep_same_cwd, keep_other_cwd, "KEEP-1", "KEEP-2")]
            assert [k for k in others if k in data] == [k for k in others if k in after.get(name, b"")], name
        else:
            assert after[name] == data, name
    if agent in SQLITE_STORES:
        db_name, table = SQLITE_STORES[agent]
        db = next(home.rglob(db_name))
        assert removed[0] == db and db.is_file()
        assert rows(db, table, keep_same_cwd) == 1
        assert rows(db, "messages" if agent == "hermes" else "message", keep_same_cwd) == 2
    assert adapter.purge_conversation(doomed, cwd=a, env=agent_env) == []


@pytest.mark.parametrize("agent", AGENTS)
def test_check_resumable_says_clearly_why_not(
    agent: str, agent_env: dict[str, str], folders: Callable[[str], str]
) -> None:
    adapter = get_adapter(agent)
    a = folders("a")
    cid = seed(agent, agent_env, a, time.time())
    adapter.purge_conversation(cid, cwd=a, env=agent_env)
    with pytest.raises(AgentError, match=f"{agent}: conversation {cid} not found.*create a new session"):
        adapter.check_resumable(cid, cwd=a, env=agent_env)
    with pytest.raises(AgentError, match="no conversation id was recorded"):
        adapter.check_resumable("", cwd=a, env=agent_env)


@pytest.mark.parametrize("agent", AGENTS)
def test_an_empty_home_has_no_conversation(
    agent: str, agent_env: dict[str, str], folders: Callable[[str], str]
) -> None:
    adapter = get_adapter(agent)
    cid = (
        "20260101_000000_abcdef"
        if agent == "hermes"
        else "ses_01a2b3c4d5e6AbCdEfGhIjKlMn"
        if agent == "opencode"
        else "0f0e0d0c-0b0a-4908-8706-050403020100"
    )
    assert not adapter.conversation_exists(cid, cwd=folders("a"), env=agent_env)
    assert adapter.purge_conversation(cid, cwd=folders("a"), env=agent_env) == []
    assert list(Path(agent_env["HOME"]).rglob("*")) == []  # looking created nothing


def test_claude_files_around_the_transcript_go_with_it(
    agent_env: dict[str, str], folders: Callable[[str], str]
) -> None:
    adapter, a = get_adapter("claude"), folders("a")
    doomed, kept = seed("claude", agent_env, a, time.time()), seed("claude", agent_env, a, time.time())
    root = Path(agent_env["HOME"]) / ".claude"
    for cid in (doomed, kept):
        (root / "projects" / re.sub(r"[^A-Za-z0-9-]", "-", a) / cid / "subagents").mkdir(parents=True)
        (root / "file-history" / cid).mkdir(parents=True)
        (root / "todos").mkdir(exist_ok=True)
        (root / "todos" / f"{cid}-agent-{cid}.json").write_text("[]")
    removed = adapter.purge_conversation(doomed, cwd=a, env=agent_env)
    assert len(removed) == 4 and all(doomed in str(p) for p in removed)
    assert all(kept in str(p) for p in adapter.conversation_files(kept, cwd=a, env=agent_env) if p.exists())
    assert len([p for p in adapter.conversation_files(kept, cwd=a, env=agent_env) if p.exists()]) == 4


def test_claude_config_dir_override_and_per_folder_transcripts(
    agent_env: dict[str, str], folders: Callable[[str], str], tmp_path: Path
) -> None:
    env = {**agent_env, "CLAUDE_CONFIG_DIR": str(tmp_path / "claude-config")}
    a = folders("a_b.c")
    cid = seed("claude", env, a, time.time())
    slug = re.sub(r"[^A-Za-z0-9-]", "-", a)
    assert (tmp_path / "claude-config" / "projects" / slug / f"{cid}.jsonl").is_file()
    assert get_adapter("claude").conversation_exists(cid, cwd=a, env=env)
    assert not get_adapter("claude").conversation_exists(cid, cwd=a, env=agent_env)


def test_hermes_purge_takes_compression_continuations_only(
    agent_env: dict[str, str], folders: Callable[[str], str]
) -> None:
    store, now = Hermes(agent_env, folders("a")), time.time()
    root, continuation, branch = (store.new_id(now) + suffix for suffix in ("r", "c", "b"))
    store.create(root, now)
    store.finish(root, now + 1, reason="compression")
    store.create(continuation, now + 1, parent=root)
    store.add_turn(continuation, "user", "later", now + 2)
    store.create(branch, now + 3, parent=continuation)  # /branch: a conversation of its own
    get_adapter("hermes").purge_conversation(root, cwd=folders("a"), env=agent_env)
    db = store.db()
    assert rows(db, "sessions", root) == rows(db, "sessions", continuation) == rows(db, "messages", continuation) == 0
    assert rows(db, "sessions", branch) == 1


def test_opencode_purge_takes_child_sessions_and_diff_files(
    agent_env: dict[str, str], folders: Callable[[str], str]
) -> None:
    store, now = Opencode(agent_env, folders("a")), time.time()
    parent, child, other = store.new_id(now), store.new_id(now + 1), store.new_id(now + 2)
    store.create(parent, now)
    store.create(child, now + 1, parent=parent)
    store.add_turn(child, "user", "subtask", now + 1)
    store.create(other, now + 2)
    removed = get_adapter("opencode").purge_conversation(parent, cwd=folders("a"), env=agent_env)
    diffs = store.data_dir() / "storage" / "session_diff"
    assert removed == [store.db(), diffs / f"{parent}.json", diffs / f"{child}.json"]
    assert rows(store.db(), "session", child) == rows(store.db(), "part", child) == 0
    assert rows(store.db(), "session", other) == 1 and (diffs / f"{other}.json").is_file()


def test_opencode_db_override(agent_env: dict[str, str], folders: Callable[[str], str], tmp_path: Path) -> None:
    env = {**agent_env, "XDG_DATA_HOME": str(tmp_path / "xdg"), "OPENCODE_DB": "custom.db"}
    cid = seed("opencode", env, folders("a"), time.time())
    assert (tmp_path / "xdg" / "opencode" / "custom.db").is_file()
    assert get_adapter("opencode").conversation_exists(cid, cwd=folders("a"), env=env)
    assert not get_adapter("opencode").conversation_exists(cid, cwd=folders("a"), env=agent_env)
