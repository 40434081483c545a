"""`mam session stop` leaves no agent behind: one deaf to its exit keys, the pane's hang-up and SIGTERM
(the fake claude with MAM_FAKE_AGENT_HANGS_ON_EXIT; opencode once hung on its way out under load and spun
a core as an orphan) is killed once its pane is closed, and so is the tool process it runs."""

from __future__ import annotations

import json
import os
import signal
import sys
from pathlib import Path
from typing import Any

from mam.agents import get_adapter
from mam.panes.tmux import TmuxBackend
from mam.sessions import stop
from mam.settings import load_settings
from mam.util.poll import wait_for
from mam.util.proc import pid_alive
from mam.workspace import Workspace
from tests.conftest import FAKES_BIN


def test_an_agent_deaf_to_its_exit_keys_hang_up_and_sigterm_is_killed_with_its_tool(
    workspace: Workspace, tmux_server: Any, tmp_path: Path
) -> None:
    backend = TmuxBackend(tmux_server.name, settings=load_settings(), ws=workspace)
    log = tmp_path / "agent.jsonl"
    env = {
        "PATH": f"{FAKES_BIN}{os.pathsep}{os.path.dirname(sys.executable)}{os.pathsep}/usr/bin:/bin",
        "HOME": str(tmp_path),
        "LANG": "C.UTF-8",
        "MAM_FAKE_AGENT_HANGS_ON_EXIT": "1",
        "MAM_FAKE_AGENT_LOG": str(log),
    }
    (tmp_path / ".claude.json").write_text(json.dumps({"projects": {str(tmp_path): {"hasTrustDialogAccepted": True}}}))
    pane = backend.create_pane(name="deaf", argv=["claude"], cwd=str(tmp_path), env=env)
    adapter = get_adapter("claude")
    wait_for(lambda: adapter.is_ready(backend.capture(pane.pane_id)), timeout=20, message="the fake never got ready")
    events = [json.loads(line) for line in log.read_text().splitlines()]
    tool = next(e["child"] for e in events if e["event"] == "child")
    assert pane.pid and pid_alive(pane.pid) and pid_alive(tool)

    try:
        assert stop.exit_agent(backend, pane.pane_id, adapter, grace=1.0) is False  # its exit keys did nothing
        assert not pid_alive(pane.pid), "the agent outlived its stop"
        assert not pid_alive(tool), "the agent's tool outlived its stop"
    finally:  # on a failure, nothing deaf is left running
        for pid in (pane.pid, tool):
            if pid_alive(pid):
                os.kill(pid, signal.SIGKILL)
    hung = [e for e in (json.loads(line) for line in log.read_text().splitlines()) if e["event"] == "hang"]
    assert hung, "the fake never tried to exit: the test proves nothing"
