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
from mam.errors import AgentError
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
    "gemini": "Error resuming session: Invalid session identifier",
}


def run(argv: list[str], *, cwd: str, home: str, log: Path, stdin: str = "") -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "HOME": home, "MAM_FAKE_AGENT_LOG": str(log)}
    for key in (
        "XDG_DATA_HOME",
        "CLAUDE_CONFIG_DIR",
        "CODEX_HOME",
        "GROK_HOME",
        "HERMES_HOME",
        "OPENCODE_DB",
        "GEMINI_CLI_HOME",
    ):
        env.pop(key, None)
    get_adapter(argv[0]).trust_folder(cwd, env)  # as mam's create does (else claude asks first, like the real one)
    return subprocess.run(
        [str(FAKES_BIN / argv[0]), *argv[1:]], input=stdin, capture_output=True, text=True, cwd=cwd, env=env, timeout=30
    )


def events(log: Path) -> list[dict]:
    return [json.loads(line) for line in log.read_text().splitlines()] if log.exists() else []


@pytest.mark.parametrize("agent", [a for a in AGENTS if a != "hermes"])
def test_resuming_an_unknown_id_fails_like_the_real_cli(
    agent: str, agent_env: dict[str, str], folders: Callable[[str], str], tmp_path: Path
) -> None:
    log = tmp_path / "log.jsonl"
    argv = get_adapter(agent).resume_argv("0f0e0d0c-0b0a-4908-8706-050403020100")
    done = run(argv, cwd=folders("a"), home=agent_env["HOME"], log=log)
    assert done.returncode == (42 if agent == "gemini" else 1)  # gemini 0.61.0 exits 42
    assert UNKNOWN[agent] in done.stderr
    assert [e["event"] for e in events(log)] == ["start", "error"]
    assert events(log)[0]["argv"] == argv and events(log)[0]["cwd"] == folders("a")


def test_hermes_given_an_unknown_id_starts_a_new_session_under_it(
    agent_env: dict[str, str], folders: Callable[[str], str], tmp_path: Path
) -> None:
    """hermes 0.19.0 (seen in a real pane): "Session not found: <id>", then a fresh session that
    runs under that id. mam must therefore check the id exists before it resumes."""
    log, unknown = tmp_path / "log.jsonl", "20260101_000000_abcdef"
    done = run(
        ["hermes", "--resume", unknown], cwd=folders("a"), home=agent_env["HOME"], log=log, stdin="hello\n/quit\n"
    )
    assert done.returncode == 0
    assert f"Session not found: {unknown}" in done.stdout
    turn = next(e for e in events(log) if e["event"] == "turn")
    assert turn["conversation"] == unknown and turn["text"] == "hello"
    with pytest.raises(AgentError, match="not found"):
        get_adapter("hermes").check_resumable("20260101_000000_abcdee", cwd=folders("a"), env=agent_env)


@pytest.mark.parametrize("agent", AGENTS)
def test_a_turn_then_the_exit_keys_then_resume_appends(
    agent: str, agent_env: dict[str, str], folders: Callable[[str], str], tmp_path: Path
) -> None:
    adapter, a, log = get_adapter(agent), folders("a"), tmp_path / "log.jsonl"
    keys = {"Enter": "\n", "C-x": "\x18", "C-c": "\x03"}
    exit_input = "".join(
        value if kind == "text" else keys.get(value, value) for kind, value in adapter.exit_keys if kind != "pause"
    )
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


def test_claude_resumes_from_any_folder(
    agent_env: dict[str, str], folders: Callable[[str], str], tmp_path: Path
) -> None:
    """claude 2.1.332 resumes a session id from another folder (the fake does the same)."""
    cid = seed("claude", agent_env, folders("a"), 0.0)
    log = tmp_path / "log"
    elsewhere = run(
        ["claude", "--resume", cid], cwd=folders("b"), home=agent_env["HOME"], log=log, stdin="more\n/exit\n"
    )
    assert elsewhere.returncode == 0, elsewhere.stderr
    assert next(e for e in events(log) if e["event"] == "turn")["conversation"] == cid
    assert get_adapter("claude").conversation_exists(cid, cwd=folders("b"), env=agent_env)


def test_gemini_resumes_only_in_its_own_folder(
    agent_env: dict[str, str], folders: Callable[[str], str], tmp_path: Path
) -> None:
    """gemini 0.61.0 keeps sessions per project folder: from another folder the id is unknown."""
    cid = seed("gemini", agent_env, folders("a"), 0.0)
    elsewhere = run(["gemini", "--resume", cid], cwd=folders("b"), home=agent_env["HOME"], log=tmp_path / "log")
    assert elsewhere.returncode == 42 and "Error resuming session" in elsewhere.stderr
    assert get_adapter("gemini").conversation_exists(cid, cwd=folders("a"), env=agent_env)
    assert not get_adapter("gemini").conversation_exists(cid, cwd=folders("b"), env=agent_env)


def test_gemini_writes_its_transcript_at_launch_and_drops_it_when_no_turn_came(
    agent_env: dict[str, str], folders: Callable[[str], str], tmp_path: Path
) -> None:
    adapter, a = get_adapter("gemini"), folders("a")
    cid = adapter.new_conversation_id()
    assert cid is not None
    done = run(adapter.launch_argv(cid), cwd=a, home=agent_env["HOME"], log=tmp_path / "log", stdin="\x03\x03")
    assert done.returncode == 0
    assert not adapter.conversation_exists(cid, cwd=a, env=agent_env)
    assert list(Path(agent_env["HOME"]).rglob("session-*.jsonl")) == []


def test_nothing_is_written_before_the_first_turn(
    agent_env: dict[str, str], folders: Callable[[str], str], tmp_path: Path
) -> None:
    for agent in [a for a in AGENTS if a != "gemini"]:  # gemini registers its project at launch
        done = run([agent], cwd=folders("a"), home=agent_env["HOME"], log=tmp_path / "log", stdin="\x04")
        assert done.returncode == 0
    # only the folder's trust records (written by run(), as mam's create does) may be there
    assert [
        p for p in Path(agent_env["HOME"]).rglob("*") if p.is_file() and p.name not in (".claude.json", "config.toml")
    ] == []


def test_command_lines_are_parsed_like_the_real_ones() -> None:
    assert parse(CLIS["codex"], ["resume", "abc", "-m", "o3"]) == (None, "abc")
    assert parse(CLIS["claude"], ["--model", "opus", "--session-id=u1"]) == ("u1", None)
    assert parse(CLIS["grok"], ["-s", "u2"]) == ("u2", None)
    assert parse(CLIS["hermes"], ["-s", "skill-a", "-r", "20260101_000000_abcdef"]) == (None, "20260101_000000_abcdef")
    assert parse(CLIS["opencode"], ["/some/project", "-s", "ses_1"]) == (None, "ses_1")
    assert parse(CLIS["agy"], ["--dangerously-skip-permissions", "--conversation", "c1"]) == (None, "c1")


@pytest.mark.parametrize("agent", ["claude", "codex", "hermes", "grok", "opencode", "gemini"])
@pytest.mark.parametrize("permissions", ["report", "full"])
def test_the_fakes_take_every_option_mam_launches_with_and_refuse_unknown_ones(
    agent: str, permissions: str, tmp_path: Path
) -> None:
    from mam.agents.base import LaunchContext

    adapter = get_adapter(agent)
    ctx = LaunchContext(
        session="s", cwd=str(tmp_path), state_dir=tmp_path / "s", permissions=permissions, mam_dir=tmp_path
    )
    options = adapter.session_options(ctx)
    for argv in (
        adapter.launch_argv(adapter.new_conversation_id()),
        adapter.resume_argv("ses_1" if agent == "opencode" else "x1"),
    ):
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
