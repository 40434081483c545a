"""Each fake agent in a real pane of a private tmux server: launch, one turn, graceful exit with
the adapter's own exit keys, then the exact resume command in the same folder."""

from __future__ import annotations

import json
import os
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from mam.agents import get_adapter
from mam.agents.base import AgentAdapter
from mam.panes.tmux import TmuxBackend
from mam.sessions import stop
from mam.settings import load_settings
from mam.workspace import Workspace
from tests.agents.conftest import AGENTS

WAIT = 15.0  # a deadline, not a delay: the happy path takes a fraction of a second


@pytest.fixture
def backend(workspace: Workspace, tmux_server: Any, fake_agents_on_path: Path) -> TmuxBackend:
    return TmuxBackend(tmux_server.name, settings=load_settings(env_file=None), ws=workspace)


@pytest.fixture
def agent_log(tmp_path: Path) -> Path:
    return tmp_path / "fake-agents.jsonl"


def event(log: Path, name: str, pid: int | None, **match: object) -> dict | None:
    """The first logged event `name` of process `pid` whose fields include `match`."""
    if not log.exists():
        return None
    for line in log.read_text().splitlines():
        try:
            record = json.loads(line)
        except ValueError:
            continue  # a line still being written
        if record["event"] == name and record["pid"] == pid and all(record.get(k) == v for k, v in match.items()):
            return record
    return None


def screen(backend: TmuxBackend, pane_id: str) -> Callable[[], str]:
    return lambda: f"screen of {pane_id}:\n{backend.capture(pane_id)}"


def press(backend: TmuxBackend, pane_id: str, adapter: AgentAdapter) -> None:
    stop.press(backend, pane_id, adapter.exit_keys)  # the very keystrokes `mam session stop` sends


def dead(backend: TmuxBackend, pane_id: str) -> bool:
    info = backend.pane(pane_id)
    return info is None or info.dead


@pytest.mark.parametrize("agent", AGENTS)
def test_launch_turn_exit_and_resume(
    agent: str, backend: TmuxBackend, agent_log: Path, tmp_path: Path, poll: Any
) -> None:
    adapter = get_adapter(agent)
    cwd = tmp_path / "project"
    cwd.mkdir()
    folder = str(cwd.resolve())
    env = {**os.environ, "MAM_FAKE_AGENT_LOG": str(agent_log)}
    agent_env = adapter.agent_env(env)
    chosen = adapter.new_conversation_id()
    since = time.time()
    adapter.trust_folder(folder, env)  # as mam's create does

    first = backend.create_pane(name=agent, argv=adapter.launch_argv(chosen), cwd=folder, env=env)
    poll(lambda: event(agent_log, "ready", first.pid), timeout=WAIT, message=screen(backend, first.pane_id))
    poll(lambda: adapter.is_ready(backend.capture(first.pane_id)), timeout=WAIT, message=screen(backend, first.pane_id))
    backend.type_text(first.pane_id, "first brief")
    backend.send_keys(first.pane_id, "Enter")
    cid = chosen or poll(
        lambda: adapter.discover(cwd=folder, since=since, env=agent_env),
        timeout=WAIT,
        message=screen(backend, first.pane_id),
    )
    poll(
        lambda: adapter.conversation_exists(cid, cwd=folder, env=agent_env),
        timeout=WAIT,
        message=screen(backend, first.pane_id),
    )
    poll(
        lambda: event(agent_log, "turn", first.pid, conversation=cid, text="first brief"),
        timeout=WAIT,
        message=screen(backend, first.pane_id),
    )
    press(backend, first.pane_id, adapter)
    poll(lambda: dead(backend, first.pane_id), timeout=WAIT, message=screen(backend, first.pane_id))
    assert event(agent_log, "exit", first.pid, conversation=cid)  # logged before the process ended
    adapter.check_resumable(cid, cwd=folder, env=agent_env)

    resume = adapter.resume_argv(cid)
    resumed_at = time.time()
    second = backend.create_pane(name=f"{agent}-resumed", argv=resume, cwd=folder, env=env)
    poll(
        lambda: event(agent_log, "ready", second.pid, conversation=cid),
        timeout=WAIT,
        message=screen(backend, second.pane_id),
    )
    # as mam's resume waits (gemini draws its box before it replays the conversation, losing keys meanwhile)
    poll(
        lambda: (
            not adapter.replay_pending(cid, env=agent_env, since=resumed_at)
            and adapter.is_ready(backend.capture(second.pane_id))
        ),
        timeout=WAIT,
        message=screen(backend, second.pane_id),
    )
    assert event(agent_log, "start", second.pid, argv=resume, cwd=folder)
    backend.type_text(second.pane_id, "second brief")
    backend.send_keys(second.pane_id, "Enter")
    poll(
        lambda: event(agent_log, "turn", second.pid, conversation=cid, text="second brief"),
        timeout=WAIT,
        message=screen(backend, second.pane_id),
    )
    press(backend, second.pane_id, adapter)
    poll(lambda: dead(backend, second.pane_id), timeout=WAIT, message=screen(backend, second.pane_id))


def test_a_bracketed_paste_arrives_as_one_turn(
    backend: TmuxBackend, agent_log: Path, tmp_path: Path, poll: Any
) -> None:
    adapter = get_adapter("claude")
    cid = adapter.new_conversation_id()
    env = {**os.environ, "MAM_FAKE_AGENT_LOG": str(agent_log)}
    adapter.trust_folder(str(tmp_path), env)
    pane = backend.create_pane(name="paste", argv=adapter.launch_argv(cid), cwd=str(tmp_path), env=env)
    poll(lambda: event(agent_log, "ready", pane.pid), timeout=WAIT, message=screen(backend, pane.pane_id))
    brief = "line one\nline two; with $(no shell) and \x1b[31m nonce-7f3a\n" + "x" * 5000
    backend.paste(pane.pane_id, brief)
    poll(
        lambda: "[Pasted text #1 +2 lines]" in backend.capture(pane.pane_id),
        timeout=WAIT,
        message=screen(backend, pane.pane_id),
    )
    assert adapter.input_pending(backend.capture(pane.pane_id), nonce="unused")
    backend.send_keys(pane.pane_id, "Enter")
    poll(lambda: event(agent_log, "turn", pane.pid, text=brief), timeout=WAIT, message=screen(backend, pane.pane_id))
    poll(lambda: "nonce-7f3a" in backend.capture(pane.pane_id), timeout=WAIT, message=screen(backend, pane.pane_id))
    assert not adapter.input_pending(backend.capture(pane.pane_id), nonce="nonce-7f3a")  # on screen, but not in the box
    press(backend, pane.pane_id, adapter)
    poll(lambda: dead(backend, pane.pane_id), timeout=WAIT, message=screen(backend, pane.pane_id))


@pytest.mark.parametrize("agent", ["claude", "codex"])
def test_an_untrusted_folder_shows_the_trust_dialog_the_adapter_detects(
    agent: str, backend: TmuxBackend, agent_log: Path, tmp_path: Path, poll: Any
) -> None:
    adapter = get_adapter(agent)
    folder = tmp_path / "checkout"
    (folder / ".git").mkdir(parents=True)  # codex asks only in a git checkout
    env = {**os.environ, "MAM_FAKE_AGENT_LOG": str(agent_log)}
    pane = backend.create_pane(
        name=agent, argv=adapter.launch_argv(adapter.new_conversation_id()), cwd=str(folder), env=env
    )
    poll(lambda: adapter.dialog(backend.capture(pane.pane_id)), timeout=WAIT, message=screen(backend, pane.pane_id))
    shown = adapter.dialog(backend.capture(pane.pane_id))
    assert shown is not None and shown.kind == "trust"
    assert not adapter.is_ready(backend.capture(pane.pane_id))
    backend.kill_pane(pane.pane_id)
