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
}
HOME_KEYS = {
    "claude": "CLAUDE_CONFIG_DIR",
    "codex": "CODEX_HOME",
    "agy": "ANTIGRAVITY_CLI_HOME",
    "hermes": "HERMES_HOME",
    "grok": "GROK_HOME",
    "opencode": "XDG_DATA_HOME",
}


def test_every_agent_has_an_adapter() -> None:
    assert set(AGENTS) <= set(known_agents())
    for name in AGENTS:
        adapter = get_adapter(name)
        assert adapter.name == name and adapter.command == name


@pytest.mark.parametrize("agent", AGENTS)
def test_resume_argv_is_exactly_the_cli_form(agent: str) -> None:
    assert get_adapter(agent).resume_argv("ID") == RESUME[agent]


@pytest.mark.parametrize("agent", ["claude", "grok"])
def test_claude_and_grok_get_the_id_at_launch(agent: str) -> None:
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
    assert adapter.exit_keys and all(kind in ("text", "key") for kind, _ in adapter.exit_keys)
    assert "HOME" in adapter.env_keys and HOME_KEYS[agent] in adapter.env_keys
    env = {"HOME": "/h", HOME_KEYS[agent]: "/x", "UNRELATED": "1"}
    assert adapter.agent_env(env) == {"HOME": "/h", HOME_KEYS[agent]: "/x"}


@pytest.mark.parametrize("agent", [a for a in AGENTS if a != "hermes"])  # hermes ids only reach SQL parameters
@pytest.mark.parametrize("bad", ["../../etc", "a/b", "", ".hidden"])
def test_ids_that_could_escape_the_store_are_refused(agent: str, bad: str, agent_env: dict[str, str]) -> None:
    with pytest.raises(AgentError):
        get_adapter(agent).purge_conversation(bad, cwd="/tmp", env=agent_env)
