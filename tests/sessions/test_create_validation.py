"""`mam session create` input checks: bad input is refused clearly and leaves no trace.

"No trace" is checked from outside: no `.mam/` folder in the workspace, no tmux socket, no
tmux server process for the workspace's socket.
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from mam.panes.tmux import socket_path
from mam.store.registry import Registry
from mam.store.sessions import SessionStatus
from mam.workspace import Workspace
from tests.helpers.mamcli import mam, mam_json
from tests.sessions.conftest import create_many, pane_ids, tmux, tmux_servers_for

HOSTILE_NAMES = ["a;b", "$(x)", "`x`", "../x", "a/b", ".hidden", "", "x" * 65, "a b", "a\nb", "a\tb", "tab\t", "-rf"]


def create(name: str, *extra: str, agent: str = "demo", env: dict[str, str] | None = None) -> Any:
    return mam("session", "create", "--agent", agent, "--role", "dev", "--session", name, *extra, env=env)


def assert_no_trace(ws: Workspace, tmux_name: str) -> None:
    assert not ws.state.exists(), f"a refused create left {sorted(p.name for p in ws.state.iterdir())} in .mam/"
    assert not socket_path(tmux_name).exists()
    assert not tmux_servers_for(tmux_name)


def test_hostile_session_names_are_refused_and_create_nothing(workspace: Workspace, tmux_server: Any) -> None:
    with ThreadPoolExecutor(max_workers=4) as pool:  # independent refusals: run them side by side
        results = dict(zip(HOSTILE_NAMES, pool.map(create, HOSTILE_NAMES)))
    for name, proc in results.items():
        assert proc.returncode == 2, (name, proc.stdout, proc.stderr)
        assert f"invalid session name {name!r}" in proc.stderr, (name, proc.stderr)
        assert "use 1-64 letters, digits" in proc.stderr
        assert proc.stdout == ""
    assert_no_trace(workspace, tmux_server.name)


BAD_OPTIONS = {
    "role": (("--role", "dev;rm"), "invalid role 'dev;rm'"),
    "server": (("--server", "srv;x"), "invalid server name 'srv;x'"),
    "server-path": (("--server", "../../tmp/evil"), "invalid server name '../../tmp/evil'"),
    "cwd": (("--cwd", "/no/such/folder"), "cwd '/no/such/folder' is not a folder"),
    "backend": (("--backend", "screen"), "Invalid value for '--backend'"),
}


def test_bad_options_are_clear_usage_errors(workspace: Workspace, tmux_server: Any) -> None:
    with ThreadPoolExecutor(max_workers=4) as pool:
        results = dict(zip(BAD_OPTIONS, pool.map(lambda case: create("fine", *case[0]), BAD_OPTIONS.values())))
    for what, proc in results.items():
        assert proc.returncode == 2, (what, proc.stdout, proc.stderr)
        assert BAD_OPTIONS[what][1] in proc.stderr, (what, proc.stderr)
    assert_no_trace(workspace, tmux_server.name)


def test_unknown_agent_backend_setting_and_file_as_cwd(workspace: Workspace, tmux_server: Any, tmp_path: Path) -> None:
    proc = create("fine", agent="gpt-9")
    assert proc.returncode == 2
    assert (
        "unknown agent 'gpt-9'; known agents: agy, claude, codex, demo, gemini, grok, hermes, opencode" in proc.stderr
    )

    proc = create("fine", env={"MAM_BACKEND": "screen"})
    assert proc.returncode == 2 and "MAM_BACKEND must be tmux or herdr" in proc.stderr

    a_file = tmp_path / "a-file"
    a_file.write_text("not a folder")
    proc = create("fine", "--cwd", str(a_file))
    assert proc.returncode == 2 and f"cwd {str(a_file)!r} is not a folder" in proc.stderr
    assert_no_trace(workspace, tmux_server.name)


def test_existing_sessions_are_refused_and_a_terminated_one_can_be_created_again(
    workspace: Workspace, tmux_server: Any
) -> None:
    longest = "L" * 64  # the longest name allowed
    rows = create_many(["busy", "resting", longest])
    mam("session", "stop", "--session", "resting", check=True)

    again = create("busy")
    assert again.returncode == 5  # a taken name is a refusal (the exit table's code for one)
    assert "session 'busy' already exists and is running" in again.stderr
    again = create("resting")
    assert again.returncode == 5
    assert "session 'resting' already exists and is stopped (resume it with `mam session resume`)" in again.stderr
    assert len(pane_ids(tmux_server.name)) == 2  # busy and the long one; the refusals started nothing

    # The agent died and the delegation wrapper marked the session terminated (Guarantee 9).
    assert tmux(tmux_server.name, "kill-pane", "-t", rows[longest]["pane_id"]).returncode == 0
    registry = Registry(workspace)
    registry.update_session(longest, status=SessionStatus.TERMINATED, note="agent not running: pane gone")
    registry.close()

    proc = create(longest, "--json")
    assert proc.returncode == 0, proc.stderr
    status = {r["name"]: r for r in mam_json("session", "status")}
    reborn = status[longest]
    assert reborn["status"] == "running" and reborn["pane_alive"] and reborn["drift"] == ""
    assert reborn["pane_id"] not in (rows[longest]["pane_id"], None)
    assert reborn["conversation_id"] != rows[longest]["conversation_id"]  # a new conversation, not the dead one
    assert sorted(status) == sorted(["busy", "resting", longest])
    assert status["busy"]["pane_id"] == rows["busy"]["pane_id"] and status["busy"]["status"] == "running"
