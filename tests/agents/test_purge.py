"""Existence, resumability and purge: exactly one conversation's files or rows, nothing else."""

from __future__ import annotations

import re
import sqlite3
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from mam.agents import get_adapter
from mam.errors import AgentError
from tests.agents.conftest import AGENTS, seed, tree
from tests.fakes.fake_stores import Hermes, Opencode

SQLITE_STORES = {"hermes": ("state.db", "sessions"), "opencode": ("opencode.db", "session")}


def rows(db: Path, table: str, cid: str) -> int:
    with sqlite3.connect(db) as conn:
        key = "id" if table in ("sessions", "session") else "session_id"
        return int(conn.execute(f"SELECT COUNT(*) FROM {table} WHERE {key} = ?", (cid,)).fetchone()[0])


@pytest.mark.parametrize("agent", AGENTS)
def test_purge_removes_one_conversation_and_keeps_the_others(agent: str, agent_env: dict[str, str], folders: Callable[[str], str]) -> None:
    adapter = get_adapter(agent)
    a, b = folders("a"), folders("b")
    now = time.time()
    keep_same_cwd = seed(agent, agent_env, a, now - 60, text="keep me")
    keep_other_cwd = seed(agent, agent_env, b, now - 30)
    doomed = seed(agent, agent_env, a, now, text="purge me")
    home = Path(agent_env["HOME"])
    before = tree(home)
    assert adapter.conversation_exists(doomed, cwd=a, env=agent_env)
    adapter.check_resumable(doomed, cwd=a, env=agent_env)

    removed = adapter.purge_conversation(doomed, cwd=a, env=agent_env)

    assert removed
    assert not adapter.conversation_exists(doomed, cwd=a, env=agent_env)
    assert adapter.conversation_exists(keep_same_cwd, cwd=a, env=agent_env)
    assert adapter.conversation_exists(keep_other_cwd, cwd=b, env=agent_env)
    after = tree(home)
    if agent in SQLITE_STORES:
        db_name, table = SQLITE_STORES[agent]
        db = next(home.rglob(db_name))
        assert removed[0] == db and db.is_file()
        assert rows(db, table, doomed) == 0 and rows(db, table, keep_same_cwd) == 1
        assert rows(db, "messages" if agent == "hermes" else "message", doomed) == 0
        assert rows(db, "messages" if agent == "hermes" else "message", keep_same_cwd) == 2
    else:
        gone = set(before) - set(after)
        assert gone and all(doomed in name for name in gone)
    # Every other file is untouched, byte for byte (the shared JSON map of agy included).
    assert {k: v for k, v in before.items() if doomed not in k and not k.endswith(".db")} == {
        k: v for k, v in after.items() if doomed not in k and not k.endswith(".db")
    }
    assert adapter.purge_conversation(doomed, cwd=a, env=agent_env) == []


@pytest.mark.parametrize("agent", AGENTS)
def test_check_resumable_says_clearly_why_not(agent: str, agent_env: dict[str, str], folders: Callable[[str], str]) -> None:
    adapter = get_adapter(agent)
    a = folders("a")
    cid = seed(agent, agent_env, a, time.time())
    adapter.purge_conversation(cid, cwd=a, env=agent_env)
    with pytest.raises(AgentError, match=f"{agent}: conversation {cid} not found.*create a new session"):
        adapter.check_resumable(cid, cwd=a, env=agent_env)
    with pytest.raises(AgentError, match="no conversation id was recorded"):
        adapter.check_resumable("", cwd=a, env=agent_env)


@pytest.mark.parametrize("agent", AGENTS)
def test_an_empty_home_has_no_conversation(agent: str, agent_env: dict[str, str], folders: Callable[[str], str]) -> None:
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


def test_claude_files_around_the_transcript_go_with_it(agent_env: dict[str, str], folders: Callable[[str], str]) -> None:
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


def test_hermes_purge_takes_compression_continuations_only(agent_env: dict[str, str], folders: Callable[[str], str]) -> None:
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


def test_opencode_purge_takes_child_sessions_and_diff_files(agent_env: dict[str, str], folders: Callable[[str], str]) -> None:
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
