"""Guarantee 10 for the demo agent: its conversations live in the workspace, never in HOME."""

from __future__ import annotations

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
