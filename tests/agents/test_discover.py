"""Discovery: the CLIs that choose their own id are found in their store by cwd and start time."""

from __future__ import annotations

import json
import os
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from mam.agents import get_adapter
from tests.agents.conftest import DISCOVERING, seed
from tests.fakes.fake_stores import Codex


@pytest.mark.parametrize("agent", DISCOVERING)
def test_nothing_to_find_in_an_empty_home(agent: str, agent_env: dict[str, str], folders: Callable[[str], str]) -> None:
    assert get_adapter(agent).discover(cwd=folders("a"), since=time.time(), env=agent_env) is None


@pytest.mark.parametrize("agent", ["codex", "hermes", "opencode"])
def test_picks_the_oldest_conversation_of_that_cwd_started_after_since(
    agent: str, agent_env: dict[str, str], folders: Callable[[str], str]
) -> None:
    a, b = folders("a"), folders("b")
    since = time.time()
    seed(agent, agent_env, a, since - 600)  # an earlier session in the same folder
    seed(agent, agent_env, b, since + 0.5)  # another folder, started first
    mine = seed(agent, agent_env, a, since + 1)
    seed(agent, agent_env, a, since + 5)  # a later session in the same folder
    adapter = get_adapter(agent)
    assert adapter.discover(cwd=a, since=since, env=agent_env) == mine
    assert adapter.discover(cwd=folders("c"), since=since, env=agent_env) is None
    assert adapter.discover(cwd=a, since=since + 60, env=agent_env) is None


@pytest.mark.parametrize("agent", DISCOVERING)
def test_two_folders_never_mix(agent: str, agent_env: dict[str, str], folders: Callable[[str], str]) -> None:
    a, b = folders("a"), folders("b")
    since = time.time()
    in_a = seed(agent, agent_env, a, since + 1)
    in_b = seed(agent, agent_env, b, since + 1)
    adapter = get_adapter(agent)
    assert adapter.discover(cwd=a, since=since, env=agent_env) == in_a
    assert adapter.discover(cwd=b, since=since, env=agent_env) == in_b


@pytest.mark.parametrize("agent", DISCOVERING)
def test_a_conversation_older_than_since_is_not_taken(
    agent: str, agent_env: dict[str, str], folders: Callable[[str], str]
) -> None:
    a = folders("a")
    since = time.time()
    seed(agent, agent_env, a, since - 600)
    assert get_adapter(agent).discover(cwd=a, since=since, env=agent_env) is None


def test_cwd_is_matched_through_symlinks(
    agent_env: dict[str, str], folders: Callable[[str], str], tmp_path: Path
) -> None:
    real = folders("real")
    link = tmp_path / "link"
    link.symlink_to(real)
    since = time.time()
    cid = seed("codex", agent_env, real, since + 1)
    assert get_adapter("codex").discover(cwd=str(link), since=since, env=agent_env) == cid


def test_codex_skips_subagent_threads_as_0171_writes_them(
    agent_env: dict[str, str], folders: Callable[[str], str]
) -> None:
    """codex 0.171: a subagent's session_meta has source {"subagent": {"thread_spawn": {"parent_thread_id"}}}."""
    a, since = folders("a"), time.time()
    store = Codex(agent_env, a)
    parent = store.new_id(since + 1)
    child = store.new_id(since + 0.5)  # spawned threads can look older than the parent: never taken
    store.create(child, since + 0.5, parent=parent)
    rollout = next(Path(agent_env["HOME"]).rglob(f"rollout-*-{child}.jsonl"))
    assert (
        json.loads(rollout.read_text().splitlines()[0])["payload"]["source"]["subagent"]["thread_spawn"][
            "parent_thread_id"
        ]
        == parent
    )
    assert get_adapter("codex").discover(cwd=a, since=since, env=agent_env) is None
    store.create(parent, since + 1)
    assert get_adapter("codex").discover(cwd=a, since=since, env=agent_env) == parent


def test_codex_ignores_subagent_threads_and_other_records(
    agent_env: dict[str, str], folders: Callable[[str], str]
) -> None:
    a = folders("a")
    since = time.time()
    child = seed("codex", agent_env, a, since + 1)
    rollout = next(Path(agent_env["HOME"]).rglob(f"rollout-*-{child}.jsonl"))
    lines = rollout.read_text().splitlines()
    head = json.loads(lines[0])
    head["payload"]["parent_thread_id"] = "0199-parent"
    rollout.write_text("\n".join([json.dumps(head), *lines[1:]]) + "\n")
    (rollout.parent / "rollout-2020-01-01T00-00-00-not-json.jsonl").write_text("{broken\n")
    mine = seed("codex", agent_env, a, since + 2)
    assert get_adapter("codex").discover(cwd=a, since=since, env=agent_env) == mine


def test_codex_home_override(agent_env: dict[str, str], folders: Callable[[str], str], tmp_path: Path) -> None:
    env = {**agent_env, "CODEX_HOME": str(tmp_path / "codex-home")}
    since = time.time()
    cid = seed("codex", env, folders("a"), since + 1)
    assert (tmp_path / "codex-home" / "sessions").is_dir()
    assert get_adapter("codex").discover(cwd=folders("a"), since=since, env=env) == cid
    assert get_adapter("codex").discover(cwd=folders("a"), since=since, env=agent_env) is None


def test_agy_takes_the_cwd_map_only_once_the_new_conversation_is_written(
    agent_env: dict[str, str], folders: Callable[[str], str]
) -> None:
    a = folders("a")
    since = time.time()
    seed("agy", agent_env, a, since - 600)  # the map still names this one until the new first turn
    assert get_adapter("agy").discover(cwd=a, since=since, env=agent_env) is None
    mine = seed("agy", agent_env, a, since + 1)
    assert get_adapter("agy").discover(cwd=a, since=since, env=agent_env) == mine


def test_hermes_and_opencode_skip_child_sessions(agent_env: dict[str, str], folders: Callable[[str], str]) -> None:
    from tests.fakes.fake_stores import Hermes, Opencode

    a = folders("a")
    since = time.time()
    for store in (Hermes(agent_env, a), Opencode(agent_env, a)):
        root = store.new_id(since + 2)
        store.create(root, since + 2)
        store.create(store.new_id(since + 1), since + 1, parent=root)  # a child row, dated earlier
        assert (
            get_adapter("hermes" if isinstance(store, Hermes) else "opencode").discover(
                cwd=a, since=since, env=agent_env
            )
            == root
        )


@pytest.mark.parametrize("agent", DISCOVERING)
def test_stores_are_found_through_the_given_env_not_the_process_env(
    agent: str,
    agent_env: dict[str, str],
    folders: Callable[[str], str],
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
) -> None:
    since = time.time()
    cid = seed(agent, agent_env, folders("a"), since + 1)
    decoy = tmp_path / "decoy"
    for key in ("HOME", "XDG_DATA_HOME", "CODEX_HOME", "HERMES_HOME", "ANTIGRAVITY_CLI_HOME"):
        monkeypatch.setenv(key, str(decoy))
    assert get_adapter(agent).discover(cwd=folders("a"), since=since, env=agent_env) == cid
    assert not decoy.exists()
    assert os.environ["HOME"] == str(decoy)


def test_hermes_follows_the_active_profile_and_hermes_home(
    agent_env: dict[str, str], folders: Callable[[str], str], tmp_path: Path
) -> None:
    """hermes 0.19: ~/.hermes/active_profile names a profile in ~/.hermes/profiles/<name>/; a
    HERMES_HOME that is a profile folder wins; a HERMES_HOME outside ~/.hermes is its own root."""
    adapter, a, home = get_adapter("hermes"), folders("a"), Path(agent_env["HOME"])
    (home / ".hermes" / "profiles" / "coder").mkdir(parents=True)
    (home / ".hermes" / "active_profile").write_text("coder\n")
    since = time.time()
    cid = seed("hermes", agent_env, a, since + 1)
    assert (home / ".hermes" / "profiles" / "coder" / "state.db").is_file()
    assert not (home / ".hermes" / "state.db").exists()
    assert adapter.discover(cwd=a, since=since, env=agent_env) == cid
    recorded = adapter.agent_env({**agent_env, "PATH": "/bin"})
    assert recorded["HERMES_HOME"] == str(home / ".hermes" / "profiles" / "coder")
    # Pinned at launch: switching the sticky profile later does not move the session.
    (home / ".hermes" / "active_profile").write_text("default\n")
    assert adapter.conversation_exists(cid, cwd=a, env=recorded)
    assert not adapter.conversation_exists(cid, cwd=a, env=agent_env)
    custom = tmp_path / "opt-data"
    (custom / "profiles" / "ops").mkdir(parents=True)
    (custom / "active_profile").write_text("ops")
    assert adapter.hermes_home({**agent_env, "HERMES_HOME": str(custom)}) == custom / "profiles" / "ops"
    assert (
        adapter.hermes_home({**agent_env, "HERMES_HOME": str(custom / "profiles" / "x")}) == custom / "profiles" / "x"
    )
