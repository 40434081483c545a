"""Guarantee 10 for the demo agent: its conversations live in the workspace, never in HOME."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from mam.workspace import Workspace
from tests.helpers.jobs import create_demo
from tests.helpers.mamcli import mam


def _files(root: Path) -> set[str]:
    return {str(p.relative_to(root)) for p in root.rglob("*")} if root.exists() else set()


def test_create_stop_resume_purge_leave_home_untouched(workspace: Workspace, tmux_server: Any) -> None:
    home = Path(os.environ["HOME"])
    before = _files(home)
    row = create_demo("d")
    mam("session", "stop", "--session", "d", check=True)
    conversation = workspace.state / "demo-agent" / "conversations" / f"{row['conversation_id']}.json"
    assert conversation.exists()
    mam("session", "resume", "--session", "d", check=True)
    mam("session", "stop", "--session", "d", "--purge-conversation", "--yes", check=True)
    assert not conversation.exists()
    assert _files(home) == before


def test_a_session_from_before_the_move_still_resumes_from_home(
    workspace: Workspace, tmux_server: Any, poll: Any
) -> None:
    from mam.store.registry import Registry

    row = create_demo("old")
    mam("session", "stop", "--session", "old", check=True)
    # What a session created before the conversations moved into the workspace looks like.
    moved = workspace.state / "demo-agent" / "conversations" / f"{row['conversation_id']}.json"
    legacy = Path(os.environ["HOME"]) / ".mam-demo" / "conversations" / moved.name
    legacy.parent.mkdir(parents=True)
    moved.rename(legacy)
    registry = Registry(workspace)
    try:
        registry.update_session("old", agent_env={"HOME": os.environ["HOME"]})
    finally:
        registry.close()
    launches = json.loads(legacy.read_text())["launches"]
    resumed = mam("session", "resume", "--session", "old", "--json")
    assert resumed.returncode == 0, resumed.stderr
    # The relaunched agent found the conversation where it was and counted this launch in it.
    poll(lambda: json.loads(legacy.read_text())["launches"] == launches + 1, timeout=20)
    mam("session", "stop", "--session", "old", check=True)
    assert legacy.exists() and not moved.exists()
