"""A session is reached through what its row recorded (issue 38, item 2; docs/architecture.md, guarantee 20).

`mam session create` records the absolute socket of the session's server (`$TMUX_TMPDIR/tmux-UID/NAME`
of the process that made the pane); every later command reaches that server by it (`tmux -S`), whatever
its own TMUX_TMPDIR: a delegation, `status`, `monitor`, `stop`, `resume` and `fork` run by a caller of
another TMUX_TMPDIR. A resume makes its pane on the recorded server again (remaking the `tmux-UID` folder
a reboot empties), or, once the TMUX_TMPDIR itself is gone, where the resuming process finds it. A row
made before sockets were recorded keeps today's behaviour. Real tmux, the demo agent, a real broker;
looked at from the outside (tmux's CLI on each socket, `status --json`, the registry file).
"""

from __future__ import annotations

import json
import os
import shutil
import sqlite3
import subprocess
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from mam.panes.tmux import socket_path
from mam.sessions.common import backend_for
from mam.settings import load_settings
from mam.store import db
from mam.store.registry import Registry
from mam.workspace import Workspace
from tests.helpers.jobs import FAST
from tests.helpers.mamcli import mam

TMUX = shutil.which("tmux") or "tmux"


@pytest.fixture
def wired_ws(workspace: Workspace, amqtt_broker, monkeypatch: pytest.MonkeyPatch) -> Workspace:
    for key, value in {**amqtt_broker.env(), **FAST, "MAM_NODE": "0"}.items():
        monkeypatch.setenv(key, value)
    return workspace


@pytest.fixture
def new_tmux_tmpdir() -> Iterator[Callable[[], Path]]:
    """Makes fresh, short TMUX_TMPDIRs; the tmux servers under each are killed by socket, the folders removed."""
    made: list[Path] = []

    def new() -> Path:
        made.append(Path(tempfile.mkdtemp(prefix="mam-ts-", dir="/tmp")))
        return made[-1]

    yield new
    for folder in made:
        kill_servers_under(folder)
        shutil.rmtree(folder, ignore_errors=True)


def kill_servers_under(tmpdir: Path) -> None:
    for sock in sorted((tmpdir / f"tmux-{os.getuid()}").glob("*")):
        subprocess.run([TMUX, "-S", str(sock), "kill-server"], capture_output=True, timeout=30)


def panes_at(sock: Path) -> list[str]:
    """The panes of the server on `sock`, asked with tmux's own CLI ([] when none runs there)."""
    if not sock.exists():
        return []
    done = subprocess.run(
        [TMUX, "-S", str(sock), "list-panes", "-a", "-F", "#{pane_id}"], capture_output=True, text=True
    )
    return done.stdout.split() if done.returncode == 0 else []


def status(env: dict[str, str]) -> dict[str, dict[str, Any]]:
    return {r["name"]: r for r in json.loads(mam("session", "status", "--json", env=env, check=True).stdout)}


def test_stop_resume_fork_status_and_monitor_reach_the_server_the_row_recorded(
    wired_ws: Workspace, new_tmux_tmpdir: Callable[[], Path]
) -> None:
    made_in, other = new_tmux_tmpdir(), new_tmux_tmpdir()
    a, b = {"TMUX_TMPDIR": str(made_in)}, {"TMUX_TMPDIR": str(other)}
    server = os.environ["MAM_TMUX_SERVER"]
    sock = made_in / f"tmux-{os.getuid()}" / server
    mam("session", "create", "--agent", "demo", "--role", "dev", "--session", "src", env=a, check=True)

    done = mam("job", "delegate", "--target", "src", "--brief", "remember heliotrope", "--json", env=b)
    assert done.returncode == 0 and json.loads(done.stdout)["state"] == "completed", done.stderr
    forked = json.loads(mam("session", "fork", "src", "--session", "copy", "--json", env=b, check=True).stdout)
    assert forked["socket"] == str(sock)  # a fork is made on its source's server
    rows = status(b)
    for name in ("src", "copy"):
        assert rows[name]["socket"] == str(sock) and rows[name]["server"] == server, rows[name]
        assert rows[name]["pane_alive"] and rows[name]["drift"] == "", rows[name]
    assert sorted(panes_at(sock)) == sorted(r["pane_id"] for r in rows.values())
    assert json.loads(mam("monitor", "--once", "--json", env=b, check=True).stdout) == []  # nothing to repair

    mam("session", "stop", "--session", "copy", env=b, check=True)
    assert rows["copy"]["pane_id"] not in panes_at(sock)
    mam("session", "resume", "--session", "copy", env=b, check=True)
    again = status(b)["copy"]
    assert again["socket"] == str(sock) and again["pane_alive"] and again["pane_id"] in panes_at(sock), again

    # A reboot empties /tmp's `tmux-UID` folder: a resume makes it again and the server there.
    for name in ("src", "copy"):
        mam("session", "stop", "--session", name, env=b, check=True)
    kill_servers_under(made_in)
    shutil.rmtree(sock.parent)
    mam("session", "resume", "--session", "src", env=b, check=True)
    back = status(b)["src"]
    assert back["socket"] == str(sock) and back["pane_alive"] and panes_at(sock) == [back["pane_id"]], back
    assert (sock.parent.stat().st_mode & 0o777) == 0o700
    assert not list(other.glob("tmux-*/*"))

    # Its TMUX_TMPDIR gone for good: the session resumes where the resuming process finds its server.
    mam("session", "stop", "--session", "src", env=b, check=True)
    kill_servers_under(made_in)
    shutil.rmtree(made_in)
    mam("session", "resume", "--session", "src", env=b, check=True)
    moved = status(b)["src"]
    assert moved["socket"] == str(other / f"tmux-{os.getuid()}" / server) and moved["pane_alive"], moved
    mam("session", "stop", "--session", "src", env=b, check=True)


def test_a_registry_made_before_sockets_gains_socket_empty_and_its_rows_are_reached_as_before(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The migration adds `socket` ('' for every existing session); such a row is reached by `-L NAME`
    from the looking process's environment, as before."""
    ws = Workspace(tmp_path / "old-ws")
    ws.ensure_state()
    conn = sqlite3.connect(str(ws.db_path), isolation_level=None)
    before = next(i for i, m in enumerate(db.MIGRATIONS) if any("ADD COLUMN socket" in s for s in m))
    for statements in db.MIGRATIONS[:before]:
        for statement in statements:
            conn.execute(statement)
    conn.execute(f"PRAGMA user_version={before}")
    conn.execute(
        "INSERT INTO sessions (name, agent, role, backend, server, cwd, status, created_at, updated_at) "
        "VALUES ('old', 'demo', 'dev', 'tmux', 'srv', '/', 'stopped', 1, 1)"
    )
    conn.close()
    registry = Registry(ws)
    try:
        row = registry.session("old")
    finally:
        registry.close()
    assert row.socket == ""
    monkeypatch.setenv("TMUX_TMPDIR", str(tmp_path / "t"))
    backend = backend_for(row, settings=load_settings(env_file=None, environ={}), ws=ws)
    assert backend.socket == str(socket_path("srv")) == str(tmp_path / "t" / f"tmux-{os.getuid()}" / "srv")
    conn = sqlite3.connect(str(ws.db_path))
    assert conn.execute("PRAGMA user_version").fetchone()[0] == db.SCHEMA_VERSION
    assert conn.execute("SELECT socket FROM sessions WHERE name = 'old'").fetchone() == ("",)
    conn.close()
