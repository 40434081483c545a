"""What each adapter declares: the launch and resume command lines, exit keys, environment keys."""

from __future__ import annotations

import uuid

import pytest

from mam.agents import get_adapter, known_agents
from mam.errors import AgentError
from tests.agents.conftest import AGENTS

RESUME = {
    "claude": ["claude", "--resume", "ID"],
    "codex": ["codex", "resume", "ID"],
    "agy": ["agy", "--conversation", "ID"],
    "hermes": ["hermes", "--resume", "ID"],
    "grok": ["grok", "--resume", "ID"],
    "opencode": ["opencode", "--session", "ID"],
    "gemini": ["gemini", "--resume", "ID"],
}
HOME_KEYS = {
    "claude": "CLAUDE_CONFIG_DIR",
    "codex": "CODEX_HOME",
    "agy": "ANTIGRAVITY_CLI_HOME",
    "hermes": "HERMES_HOME",
    "grok": "GROK_HOME",
    "opencode": "XDG_DATA_HOME",
    "gemini": "GEMINI_CLI_HOME",
}


def test_every_agent_has_an_adapter() -> None:
    assert set(AGENTS) <= set(known_agents())
    for name in AGENTS:
        adapter = get_adapter(name)
        assert adapter.name == name and adapter.command == name


@pytest.mark.parametrize("agent", AGENTS)
def test_resume_argv_is_exactly_the_cli_form(agent: str) -> None:
    assert get_adapter(agent).resume_argv("ID") == RESUME[agent]


@pytest.mark.parametrize("agent", ["claude", "grok", "gemini"])
def test_claude_grok_and_gemini_get_the_id_at_launch(agent: str) -> None:
    adapter = get_adapter(agent)
    cid = adapter.new_conversation_id()
    assert adapter.id_at_launch and cid is not None
    assert str(uuid.UUID(cid)) == cid
    assert adapter.launch_argv(cid) == [agent, "--session-id", cid]


@pytest.mark.parametrize("agent", ["codex", "agy", "hermes", "opencode"])
def test_the_others_launch_bare_and_pick_their_own_id(agent: str) -> None:
    adapter = get_adapter(agent)
    assert not adapter.id_at_launch
    assert adapter.new_conversation_id() is None
    assert adapter.launch_argv(None) == [agent]


@pytest.mark.parametrize("agent", AGENTS)
def test_exit_keys_and_env_keys(agent: str) -> None:
    adapter = get_adapter(agent)
    assert adapter.exit_keys and all(kind in ("text", "key", "pause") for kind, _ in adapter.exit_keys)
    assert all(float(value) > 0 for kind, value in adapter.exit_keys if kind == "pause")
    assert "HOME" in adapter.env_keys and HOME_KEYS[agent] in adapter.env_keys
    env = {"HOME": "/h", HOME_KEYS[agent]: "/x", "UNRELATED": "1"}
    assert adapter.agent_env(env) == {"HOME": "/h", HOME_KEYS[agent]: "/x"}


@pytest.mark.parametrize("agent", [a for a in AGENTS if a != "hermes"])  # hermes ids only reach SQL parameters
@pytest.mark.parametrize("bad", ["../../etc", "a/b", "", ".hidden"])
def test_ids_that_could_escape_the_store_are_refused(agent: str, bad: str, agent_env: dict[str, str]) -> None:
    with pytest.raises(AgentError):
        get_adapter(agent).purge_conversation(bad, cwd="/tmp", env=agent_env)


# What each real CLI's own delete command is (checked with its --help: codex 0.171.0,
# opencode 1.18.33, hermes 0.19.0); gemini's --delete-session is not used (see gemini.py).
DELETE = {
    "codex": ["delete", "--force", "ID"],
    "opencode": ["session", "delete", "ID"],
    "hermes": ["sessions", "delete", "--yes", "ID"],
}


@pytest.mark.parametrize("agent", AGENTS)
def test_the_clis_own_delete_command_and_the_path_it_is_found_on(agent: str) -> None:
    adapter = get_adapter(agent)
    assert [a.replace("{id}", "ID") for a in adapter.delete_args] == DELETE.get(agent, [])
    recorded = adapter.agent_env({"HOME": "/h", "PATH": "/bin:/usr/bin"})
    assert ("PATH" in recorded) == (agent in DELETE)


def test_exit_keys_the_real_clis_need() -> None:
    # codex 0.171.0 queues "/exit" typed mid-turn: Ctrl-C interrupts first.
    assert get_adapter("codex").exit_keys == (
        ("key", "C-c"),
        ("pause", "0.5"),
        ("text", "/exit"),
        ("pause", "0.3"),
        ("key", "Enter"),
    )
    # opencode 1.18.33 reads Escape then C-x at once as Alt+C-x; its exit is <leader>q.
    assert get_adapter("opencode").exit_keys == (("key", "C-x"), ("key", "q"))
    # gemini 0.61.0: keys within ~1 s are one input to it; Ctrl-C cancels a turn or clears the box.
    assert get_adapter("gemini").exit_keys == (
        ("key", "C-c"),
        ("pause", "1.0"),
        ("text", "/quit"),
        ("pause", "1.0"),
        ("key", "Enter"),
    )
