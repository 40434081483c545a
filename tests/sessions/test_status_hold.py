"""`mam status` says when the workspace is held (`mam pause --all`): who placed the hold, since when, and how
to release it; the line goes once the hold is released."""

from __future__ import annotations

import re
from typing import Any

from mam.workspace import Workspace
from tests.helpers.mamcli import mam


def test_status_shows_the_workspace_hold_until_it_is_released(workspace: Workspace, tmux_server: Any) -> None:
    mam("session", "create", "--agent", "demo", "--role", "dev", "--session", "dev-1", check=True)
    before = mam("status", check=True).stdout
    assert "held" not in before and before.startswith("NAME")
    mam("pause", "--all", "--by", "ops", check=True)
    lines = mam("status", check=True).stdout.splitlines()
    assert lines[0].startswith("the workspace is held by ops since "), lines
    assert "(safe)" in lines[0] and lines[0].endswith("mam resume --all releases it"), lines
    assert lines[1].startswith("NAME") and lines[2].startswith("dev-1"), lines
    assert re.search(r" since \d\d:\d\d:\d\d ", lines[0]), lines  # a local clock time
    mam("resume", "--all", check=True)
    after = mam("status", check=True).stdout
    assert "held" not in after and after.startswith("NAME")
