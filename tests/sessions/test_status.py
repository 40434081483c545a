"""`mam session status`: looking never starts anything (Guarantee 6) and drift is reported.

The looking tests run status under a child-subreaper parent, so even a daemon that
double-forked away from status would be caught, and scan /proc for a tmux server on the
workspace's socket; they also compare the workspace's files before and after.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from mam.panes.tmux import socket_path
from mam.store.registry import Registry
from mam.store.sessions import SessionStatus
from mam.workspace import Workspace
from tests.helpers.mamcli import MAM, mam, mam_json
from tests.sessions.conftest import (
    create_many,
    descendants,
    files_under,
    pane_ids,
    run_catching_orphans,
    tmux,
    tmux_servers_for,
    type_line,
)

SQLITE_SIDE_FILES = ("agent-sessions.db-wal", "agent-sessions.db-shm")


def without_sqlite_side_files(tree: dict[str, Any]) -> dict[str, Any]:
    return {path: v for path, v in tree.items() if not path.endswith(SQLITE_SIDE_FILES)}


def look(ws: Workspace, *args: str) -> dict[str, Any]:
    """Run `mam session status ARGS` (exit 0) and prove it left no process behind, not even a daemon."""
    before = descendants(os.getpid())
    result = run_catching_orphans([MAM, "--workspace", str(ws.root), "session", "status", *args])
    assert result["rc"] == 0, result
    assert result["left"] == [], f"status left processes behind: {result['left']}"
    assert descendants(os.getpid()) == before
    return result


def test_status_with_the_tmux_server_gone_starts_nothing_and_reports_it(
    workspace: Workspace, tmux_server: Any, poll: Any
) -> None:
    create_many(["one", "two", "three"])
    mam("session", "stop", "--session", "three", check=True)
    socket = socket_path(tmux_server.name)

    def check_looking(expect_socket: os.stat_result | None) -> None:
        files_before = without_sqlite_side_files(files_under(workspace.root))
        text = look(workspace)
        rows = json.loads(look(workspace, "--json")["stdout"])
        if expect_socket is None:
            assert not socket.exists(), "status created the tmux socket"
        else:
            now = socket.stat()
            assert (now.st_ino, now.st_mtime_ns) == (expect_socket.st_ino, expect_socket.st_mtime_ns), (
                "status touched the stale socket"
            )
        assert not tmux_servers_for(tmux_server.name), "a tmux server runs on the workspace's socket"
        assert without_sqlite_side_files(files_under(workspace.root)) == files_before, "status wrote into the workspace"
        by_name = {r["name"]: r for r in rows}
        assert sorted(by_name) == ["one", "three", "two"]
        for name in ("one", "two"):
            row = by_name[name]
            assert row["status"] == "running" and not row["pane_alive"]
            assert row["drift"] == f"running in the registry, tmux server {tmux_server.name!r} not running"
            assert row["drift"] in text["stdout"]
        assert by_name["three"]["status"] == "stopped" and by_name["three"]["drift"] == ""

    assert tmux_servers_for(tmux_server.name), "the /proc scan does not see the running server"
    # The server dies under running sessions (kill-server, OOM, reboot): tmux leaves its socket file.
    assert tmux(tmux_server.name, "kill-server").returncode == 0
    poll(lambda: not tmux_servers_for(tmux_server.name), timeout=10, message="the tmux server did not exit")
    check_looking(expect_socket=socket.stat())
    # And with the stale socket cleaned away.
    tmux_server.kill()
    assert not socket.exists()
    check_looking(expect_socket=None)


def test_status_without_a_registry_creates_nothing(tmp_path: Path, tmux_server: Any, monkeypatch: Any) -> None:
    empty = tmp_path / "empty-ws"
    empty.mkdir()
    monkeypatch.setenv("MAM_TMUX_SERVER", tmux_server.name)
    ws = Workspace(empty)

    text = look(ws)
    assert text["stdout"].strip() == "no sessions" and text["stderr"] == ""
    assert json.loads(look(ws, "--json")["stdout"]) == []
    # and the same found from the current folder instead of --workspace
    assert mam("session", "status", env={"MAM_WORKSPACE": str(empty)}).stdout.strip() == "no sessions"

    assert list(empty.iterdir()) == [], "status wrote into a workspace that had no registry"
    assert not socket_path(tmux_server.name).exists()
    assert not tmux_servers_for(tmux_server.name)


def test_status_reports_each_kind_of_drift(workspace: Workspace, tmux_server: Any, poll: Any) -> None:
    rows = create_many(["healthy", "gone", "exited", "stopped-alive"])
    server = tmux_server.name

    # a pane killed under a running session
    assert tmux(server, "kill-pane", "-t", rows["gone"]["pane_id"]).returncode == 0
    # an agent that exited by itself: its pane stays, dead (remain-on-exit)
    type_line(server, rows["exited"]["pane_id"], "/exit")
    poll(
        lambda: (
            tmux(server, "display-message", "-p", "-t", rows["exited"]["pane_id"], "#{pane_dead}").stdout.strip() == "1"
        ),
        timeout=15,
        message="the demo agent did not exit",
    )
    # a session the registry says is stopped while its pane still runs (e.g. a stop that died
    # between the registry write and closing the pane, or someone editing the registry)
    registry = Registry(workspace)
    registry.update_session("stopped-alive", status=SessionStatus.STOPPED)
    registry.close()

    status = {r["name"]: r for r in mam_json("session", "status")}
    assert status["healthy"]["drift"] == "" and status["healthy"]["pane_alive"]
    assert status["gone"]["drift"] == "running in the registry, pane gone"
    assert status["gone"]["pane_alive"] is False and status["gone"]["status"] == "running"
    assert status["exited"]["drift"] == "running in the registry, agent exited (pane dead)"
    assert status["exited"]["pane_alive"] is False
    assert status["stopped-alive"]["drift"] == "stopped in the registry, but its pane is alive"
    assert status["stopped-alive"]["pane_alive"] is True

    table = mam("session", "status", check=True).stdout
    for name, row in status.items():
        line = next(line for line in table.splitlines() if line.startswith(name + " "))
        assert line.endswith(row["drift"] or "-"), line
    # looking repaired nothing and started nothing: same panes, same rows
    assert len(pane_ids(server)) == 3
    assert {r["name"]: r["status"] for r in mam_json("session", "status")} == {
        "healthy": "running",
        "gone": "running",
        "exited": "running",
        "stopped-alive": "stopped",
    }


def test_the_orphan_catcher_sees_a_daemon(tmux_server: Any) -> None:
    """Positive control for `look`: a tmux server started under it (it daemonizes) is reported."""
    result = run_catching_orphans(["tmux", "-L", tmux_server.name, "new-session", "-d", "--", "sleep", "60"])
    assert result["rc"] == 0, result
    assert result["left"] and set(result["left"]) <= set(tmux_servers_for(tmux_server.name))


def test_a_workspace_that_does_not_exist_is_a_usage_error(tmp_path: Path) -> None:
    missing = tmp_path / "no-such-workspace"
    proc = mam("session", "status", "--workspace", str(missing))
    assert proc.returncode == 2
    assert f"workspace folder does not exist: {missing} (from --workspace)" in proc.stderr
    proc = mam("session", "status", env={"MAM_WORKSPACE": str(missing)})
    assert proc.returncode == 2 and "(from MAM_WORKSPACE)" in proc.stderr
    assert not missing.exists()
