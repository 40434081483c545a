"""`mam session create` checks the agent's program before it starts anything, and fails when the agent
exits while starting: never a session reported `running` whose pane is dead."""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Any

from mam.panes.tmux import socket_path
from mam.store.registry import Registry
from mam.workspace import Workspace
from tests.helpers.mamcli import mam
from tests.sessions.conftest import pane_ids, tmux_servers_for


def create(agent: str, env: dict[str, str]) -> Any:
    return mam("session", "create", "--agent", agent, "--role", "developer", "--session", "dev-1", env=env)


def bare_path(*extra: Path) -> str:
    """A PATH with mam's interpreter, tmux and the given folders, and no agent CLI."""
    return os.pathsep.join([*(str(p) for p in extra), str(Path(sys.executable).parent), "/usr/bin", "/bin"])


def test_an_agent_not_on_path_is_refused_before_anything_starts(workspace: Workspace, tmux_server: Any) -> None:
    for agent, install in (("claude", "npm install -g @anthropic-ai/claude-code"), ("codex", "@openai/codex")):
        proc = create(agent, {"PATH": bare_path()})
        assert proc.returncode == 2, (proc.stdout, proc.stderr)
        assert f"the program '{agent}' is not on PATH" in proc.stderr
        assert install in proc.stderr
        assert proc.stderr.count("\n") == 1 and proc.stdout == ""
    assert not workspace.state.exists()  # no registry, no row
    assert not socket_path(tmux_server.name).exists()  # no server, no pane
    assert not tmux_servers_for(tmux_server.name)


def test_an_agent_that_exits_while_starting_fails_the_create(
    workspace: Workspace, tmux_server: Any, tmp_path: Path
) -> None:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    claude = bin_dir / "claude"
    claude.write_text("#!/bin/sh\necho 'Invalid API key: please run /login'\nexit 3\n")
    claude.chmod(0o755)
    proc = create("claude", {"PATH": bare_path(bin_dir)})
    assert proc.returncode == 1, (proc.stdout, proc.stderr)
    assert "claude (claude) exited with status 3 while the session was starting" in proc.stderr
    assert "Invalid API key: please run /login" in proc.stderr
    assert "running" not in proc.stdout
    registry = Registry(workspace)
    try:
        assert registry.sessions() == []  # no row left, `running` or otherwise
    finally:
        registry.close()
    assert pane_ids(tmux_server.name) == []
    # The name is free: a working agent takes it.
    fixed = create("demo", {})
    assert fixed.returncode == 0, fixed.stderr
