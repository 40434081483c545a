"""`mam session onboard-orchestrator`: records the orchestrator's own pane.

Inside a pane the pane is read from what tmux itself put in the environment (TMUX,
TMUX_PANE): the command runs as the pane's own program on the test's private server.
"""

from __future__ import annotations

import json
from typing import Any

from mam.store.registry import Registry
from mam.workspace import Workspace
from tests.helpers.mamcli import MAM, mam
from tests.sessions.conftest import tmux


def recorded(ws: Workspace) -> list[dict[str, Any]]:
    if not ws.db_path.exists():
        return []
    registry = Registry(ws)
    try:
        return [o.__dict__ for o in registry.orchestrators()]
    finally:
        registry.close()


def test_inside_a_tmux_pane_the_pane_is_detected(workspace: Workspace, tmux_server: Any, poll: Any) -> None:
    # The pane runs mam directly (no shell) with the environment of the client that started the
    # server, plus TMUX and TMUX_PANE, which tmux sets itself.
    done = tmux(
        tmux_server.name,
        "new-session",
        "-d",
        "-P",
        "-F",
        "#{pane_id}",
        "-s",
        "orc",
        "-x",
        "200",
        "-y",
        "50",
        "--",
        MAM,
        "--workspace",
        str(workspace.root),
        "session",
        "onboard-orchestrator",
        "--json",
    )
    assert done.returncode == 0, done.stderr
    pane = done.stdout.strip()
    assert pane.startswith("%")

    rows = poll(lambda: recorded(workspace), timeout=20, message="the orchestrator pane was not recorded")
    assert len(rows) == 1
    row = rows[0]
    assert (row["backend"], row["server"], row["pane_id"]) == ("tmux", tmux_server.name, pane)
    assert row["key"] == f"tmux:{tmux_server.name}:{pane}"


def test_explicit_backend_server_and_pane_are_recorded(workspace: Workspace) -> None:
    proc = mam(
        "session",
        "onboard-orchestrator",
        "--backend",
        "tmux",
        "--server",
        "elsewhere",
        "--pane",
        "%7",
        "--json",
        check=True,
    )
    assert json.loads(proc.stdout)["key"] == "tmux:elsewhere:%7"
    proc = mam(
        "session",
        "onboard-orchestrator",
        "--backend",
        "herdr",
        "--server",
        "main",
        "--pane",
        "w1:p2",
        "--session-id",
        "abc",
        check=True,
    )
    assert "orchestrator pane recorded: herdr:main:w1:p2" in proc.stdout
    # Explicit options win over a pane detected from the environment.
    proc = mam(
        "session",
        "onboard-orchestrator",
        "--backend",
        "tmux",
        "--server",
        "other",
        "--pane",
        "%3",
        "--json",
        env={"TMUX": "/tmp/tmux-0/detected,1,0", "TMUX_PANE": "%99"},
        check=True,
    )
    assert json.loads(proc.stdout)["key"] == "tmux:other:%3"

    rows = {r["key"]: r for r in recorded(workspace)}
    assert sorted(rows) == ["herdr:main:w1:p2", "tmux:elsewhere:%7", "tmux:other:%3"]
    assert (
        rows["herdr:main:w1:p2"]["backend"],
        rows["herdr:main:w1:p2"]["server"],
        rows["herdr:main:w1:p2"]["pane_id"],
        rows["herdr:main:w1:p2"]["session"],
    ) == ("herdr", "main", "w1:p2", "abc")


def test_outside_any_pane_without_options_it_fails_clearly(workspace: Workspace) -> None:
    proc = mam("session", "onboard-orchestrator")
    assert proc.returncode == 2
    assert "not inside a tmux or herdr pane" in proc.stderr and "--backend, --server and --pane" in proc.stderr
    proc = mam("session", "onboard-orchestrator", "--pane", "%1")
    assert proc.returncode == 2 and "--pane needs --backend and --server" in proc.stderr
    assert recorded(workspace) == []
