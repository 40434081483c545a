"""Purge goes through the CLI's own delete command when the session's PATH has one, and mam
then removes what that command leaves; the CLI is never started when there is nothing to delete."""

from __future__ import annotations

import json
import os
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from mam.agents import get_adapter
from tests.agents.conftest import seed, tree
from tests.conftest import FAKES_BIN
from tests.fakes.fake_stores import Codex

OWN_DELETE = ("codex", "opencode", "hermes")


def cli_env(agent_env: dict[str, str], log: Path) -> dict[str, str]:
    """What a session records (HOME, PATH with the CLI on it), plus the fakes' log."""
    path = os.pathsep.join([str(FAKES_BIN), os.path.dirname(sys.executable), "/usr/bin", "/bin"])
    return {**agent_env, "PATH": path, "MAM_FAKE_AGENT_LOG": str(log)}


def deletes(log: Path) -> list[str]:
    lines = log.read_text().splitlines() if log.exists() else []
    return [e["conversation"] for e in map(json.loads, lines) if e["event"] == "delete"]


@pytest.mark.parametrize("agent", OWN_DELETE)
def test_purge_runs_the_clis_own_delete_then_closes_the_gaps(
    agent: str, agent_env: dict[str, str], folders: Callable[[str], str], tmp_path: Path
) -> None:
    log, a = tmp_path / "agent.log", folders("a")
    env = cli_env(agent_env, log)
    kept = seed(agent, agent_env, a, time.time() - 30, text="KEEP-1")
    doomed = seed(agent, agent_env, a, time.time(), text="DOOMED-BRIEF")
    adapter = get_adapter(agent)

    removed = adapter.purge_conversation(doomed, cwd=a, env=env)

    assert deletes(log) == [doomed]  # the CLI's own command, once, for that id
    assert removed
    assert not adapter.conversation_exists(doomed, cwd=a, env=env)
    assert adapter.conversation_exists(kept, cwd=a, env=env)
    after = tree(Path(agent_env["HOME"]))
    assert not [
        name for name, data in after.items() if b"DOOMED-BRIEF" in data or doomed.encode() in data or doomed in name
    ]
    assert any(b"KEEP-1" in data for data in after.values())


@pytest.mark.parametrize("agent", OWN_DELETE)
def test_nothing_to_purge_never_starts_the_cli(
    agent: str, agent_env: dict[str, str], folders: Callable[[str], str], tmp_path: Path
) -> None:
    log = tmp_path / "agent.log"
    cid = (
        "20260101_000000_abcdef"
        if agent == "hermes"
        else "ses_01a2b3c4d5e6AbCdEfGhIjKlMn"
        if agent == "opencode"
        else Codex({}, "").new_id(0)
    )
    assert get_adapter(agent).purge_conversation(cid, cwd=folders("a"), env=cli_env(agent_env, log)) == []
    assert deletes(log) == [] and list(Path(agent_env["HOME"]).rglob("*")) == []


def test_codex_purge_takes_the_threads_subagents_and_its_history_lines(
    agent_env: dict[str, str], folders: Callable[[str], str], tmp_path: Path
) -> None:
    a, now = folders("a"), time.time()
    store = Codex(agent_env, a)
    parent, child, other = store.new_id(now), store.new_id(now + 1), store.new_id(now + 2)
    store.create(parent, now)
    store.add_turn(parent, "user", "DOOMED-BRIEF", now)
    store.create(child, now + 1, parent=parent)
    store.add_turn(child, "user", "DOOMED-SUBTASK", now + 1)
    store.create(other, now + 2)
    store.add_turn(other, "user", "KEEP-1", now + 2)

    get_adapter("codex").purge_conversation(parent, cwd=a, env=cli_env(agent_env, tmp_path / "agent.log"))

    after = tree(Path(agent_env["HOME"]))
    assert not [
        n for n, d in after.items() if b"DOOMED" in d or parent.encode() in d or child.encode() in d or child in n
    ]
    assert get_adapter("codex").conversation_exists(other, cwd=a, env=agent_env)
    assert b"KEEP-1" in after[".codex/history.jsonl"]
