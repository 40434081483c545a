"""The fake CLIs themselves: command lines, refusals and input handling like the real ones.

These run the fakes as plain subprocesses (stdin is a pipe, not a terminal); the tmux tests
run them in real panes.
"""

from __future__ import annotations

import json
import os
import subprocess
from collections.abc import Callable
from pathlib import Path

import pytest

from mam.agents import get_adapter
from tests.agents.conftest import AGENTS, seed
from tests.conftest import FAKES_BIN
from tests.fakes.fake_agent import CLIS, Keys, Usage, parse

UNKNOWN = {
    "claude": "No conversation found with session ID: ",
    "codex": "ERROR: No saved session found with ID ",
    "agy": "not found",
    "hermes": "Session not found",
    "grok": "not found",
    "opencode": "Session not found",
}


def run(argv: list[str], *, cwd: str, home: str, log: Path, stdin: str = "") -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "HOME": home, "MAM_FAKE_AGENT_LOG": str(log)}
    for key in ("XDG_DATA_HOME", "CLAUDE_CONFIG_DIR", "CODEX_HOME", "GROK_HOME", "HERMES_HOME", "OPENCODE_DB"):
        env.pop(key, None)
    get_adapter(argv[0]).trust_folder(cwd, env)  # as mam's create does (else claude asks first, like the real one)
    return subprocess.run([str(FAKES_BIN / argv[0]), *argv[1:]], input=stdin, capture_output=True, text=True, cwd=cwd, env=env, timeout=30)


def events(log: Path) -> list[dict]:
    return [json.loads(line) for line in log.read_text().splitlines()] if log.exists() else []


@pytest.mark.parametrize("agent", AGENTS)
def test_resuming_an_unknown_id_fails_like_the_real_cli(
    agent: str, agent_env: dict[str, str], folders: Callable[[str], str], tmp_path: Path
) -> None:
    log = tmp_path / "log.jsonl"
    argv = get_adapter(agent).resume_argv("0f0e0d0c-0b0a-4908-8706-050403020100")
    done = run(argv, cwd=folders("a"), home=agent_env["HOME"], log=log)
    assert done.returncode != 0
    assert UNKNOWN[agent] in done.stderr
    assert [e["event"] for e in events(log)] == ["start", "error"]
    assert events(log)[0]["argv"] == argv and events(log)[0]["cwd"] == folders("a")


@pytest.mark.parametrize("agent", AGENTS)
def test_a_turn_then_the_exit_keys_then_resume_appends(
    agent: str, agent_env: dict[str, str], folders: Callable[[str], str], tmp_path: Path
) -> None:
    adapter, a, log = get_adapter(agent), folders("a"), tmp_path / "log.jsonl"
    exit_input = "".join(value if kind == "text" else {"Enter": "\n", "C-x": "\x18"}.get(value, value) for kind, value in adapter.exit_keys)
    cid = adapter.new_conversation_id()
    first = run(adapter.launch_argv(cid), cwd=a, home=agent_env["HOME"], log=log, stdin="first line\n" + exit_input)
    assert first.returncode == 0, first.stderr
    turn = next(e for e in events(log) if e["event"] == "turn")
    cid = cid or turn["conversation"]
    assert turn["conversation"] == cid and turn["text"] == "first line"
    assert events(log)[-1]["event"] == "exit"
    assert adapter.conversation_exists(cid, cwd=a, env=agent_env)
    second = run(adapter.resume_argv(cid), cwd=a, home=agent_env["HOME"], log=log, stdin="second line\n" + exit_input)
    assert second.returncode == 0, second.stderr
    turns = [e for e in events(log) if e["event"] == "turn"]
    assert [(t["conversation"], t["text"]) for t in turns] == [(cid, "first line"), (cid, "second line")]


@pytest.mark.parametrize("agent", ["claude", "grok"])
def test_an_id_given_at_launch_must_be_a_fresh_uuid(
    agent: str, agent_env: dict[str, str], folders: Callable[[str], str], tmp_path: Path
) -> None:
    bad = run([agent, "--session-id", "not-a-uuid"], cwd=folders("a"), home=agent_env["HOME"], log=tmp_path / "log")
    assert bad.returncode == 1 and "UUID" in bad.stderr
    cid = seed(agent, agent_env, folders("a"), 0.0)
    taken = run([agent, "--session-id", cid], cwd=folders("a"), home=agent_env["HOME"], log=tmp_path / "log")
    assert taken.returncode == 1 and cid in taken.stderr


def test_claude_resumes_only_from_the_folder_it_ran_in(agent_env: dict[str, str], folders: Callable[[str], str], tmp_path: Path) -> None:
    cid = seed("claude", agent_env, folders("a"), 0.0)
    elsewhere = run(["claude", "--resume", cid], cwd=folders("b"), home=agent_env["HOME"], log=tmp_path / "log")
    assert elsewhere.returncode == 1 and "No conversation found" in elsewhere.stderr


def test_nothing_is_written_before_the_first_turn(agent_env: dict[str, str], folders: Callable[[str], str], tmp_path: Path) -> None:
    for agent in AGENTS:
        done = run([agent], cwd=folders("a"), home=agent_env["HOME"], log=tmp_path / "log", stdin="\x04")
        assert done.returncode == 0
    # only the folder's trust records (written by run(), as mam's create does) may be there
    assert [p for p in Path(agent_env["HOME"]).rglob("*") if p.is_file() and p.name not in (".claude.json", "config.toml")] == []


def test_command_lines_are_parsed_like_the_real_ones() -> None:
    assert parse(CLIS["codex"], ["resume", "abc", "-m", "o3"]) == (None, "abc")
    assert parse(CLIS["claude"], ["--model", "opus", "--session-id=u1"]) == ("u1", None)
    assert parse(CLIS["grok"], ["-s", "u2"]) == ("u2", None)
    assert parse(CLIS["hermes"], ["-s", "skill-a", "-r", "20260101_000000_abcdef"]) == (None, "20260101_000000_abcdef")
    assert parse(CLIS["opencode"], ["/some/project", "-s", "ses_1"]) == (None, "ses_1")
    assert parse(CLIS["agy"], ["--dangerously-skip-permissions", "--conversation", "c1"]) == (None, "c1")


@pytest.mark.parametrize("agent", ["claude", "codex", "hermes", "grok", "opencode"])
@pytest.mark.parametrize("permissions", ["report", "full"])
def test_the_fakes_take_every_option_mam_launches_with_and_refuse_unknown_ones(agent: str, permissions: str, tmp_path: Path) -> None:
    from mam.agents.base import LaunchContext

    adapter = get_adapter(agent)
    ctx = LaunchContext(session="s", cwd=str(tmp_path), state_dir=tmp_path / "s", permissions=permissions, mam_dir=tmp_path)
    options = adapter.session_options(ctx)
    for argv in (adapter.launch_argv(adapter.new_conversation_id()), adapter.resume_argv("ses_1" if agent == "opencode" else "x1")):
        parse(CLIS[agent], adapter.with_options(argv, options)[1:])
    with pytest.raises(Usage):
        parse(CLIS[agent], ["--no-such-option"])


def test_keys_split_typing_pastes_and_escape_sequences_across_reads() -> None:
    keys = Keys()
    assert keys.feed("ab\x1b[A") == [("char", "a"), ("char", "b"), ("key", "escape")]
    assert keys.feed("\x1b[200~line one\nline") == []
    assert keys.feed(" two\x1b[20") == []
    assert keys.feed("1~\r\x18q\x03\x7f") == [
        ("paste", "line one\nline two"),
        ("key", "enter"),
        ("key", "ctrl-x"),
        ("char", "q"),
        ("key", "ctrl-c"),
        ("key", "backspace"),
    ]
    assert keys.feed("\x1b[2") == [] and keys.feed("00~x\x1b[201~") == [("paste", "x")]
