"""Fixtures and helpers for the session tests: a mirror reader process, tmux and /proc probes.

Everything here looks from the outside (tmux's own CLI on the private socket, /proc, the
files in the workspace), so the tests do not trust the code they are checking.
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml

from mam.panes.tmux import socket_path
from mam.store.registry import Registry
from mam.util.proc import children, cmdline
from mam.workspace import Workspace

HERE = Path(__file__).resolve().parent
READER = HERE / "mirror_reader.py"
WRITER = HERE / "registry_writer.py"


# -- the YAML mirror ----------------------------------------------------------------------------
@dataclass
class MirrorReader:
    """A low-priority process that parses the YAML mirror in a tight loop until stopped."""

    proc: subprocess.Popen[str]
    stop_file: Path

    def stop(self, timeout: float = 30.0) -> dict[str, Any]:
        self.stop_file.touch()
        out, err = self.proc.communicate(timeout=timeout)
        assert self.proc.returncode == 0, f"mirror reader failed: {err}"
        return json.loads(out)


@pytest.fixture
def mirror_reader(tmp_path: Path) -> Iterator[Any]:
    """mirror_reader(ws) starts a reader of ws's mirror; `.stop()` returns its counts."""
    started: list[MirrorReader] = []

    def start(ws: Workspace) -> MirrorReader:
        stop_file = tmp_path / f"stop-reader-{len(started)}"
        proc = subprocess.Popen(
            [sys.executable, str(READER), str(ws.mirror_path), str(stop_file)],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        reader = MirrorReader(proc, stop_file)
        started.append(reader)
        return reader

    yield start
    for reader in started:
        if reader.proc.poll() is None:
            reader.proc.kill()
            reader.proc.communicate()


def mirror_doc(ws: Workspace) -> dict[str, Any]:
    return yaml.safe_load(ws.mirror_path.read_text(encoding="utf-8"))


def db_sessions(ws: Workspace) -> tuple[int, list[dict[str, Any]]]:
    """(generation, rows as dicts) straight from the database, through a fresh connection."""
    from mam.store import sessions as sessions_table

    registry = Registry(ws)
    try:
        with registry.read() as conn:
            return sessions_table.generation(conn), [r.as_dict() for r in sessions_table.list_all(conn)]
    finally:
        registry.close()


def assert_mirror_matches_db(ws: Workspace) -> None:
    generation, rows = db_sessions(ws)
    doc = mirror_doc(ws)
    assert doc["generation"] == generation
    assert doc["sessions"] == rows


# -- tmux, seen through its own CLI -------------------------------------------------------------
def tmux(server: str, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["tmux", "-L", server, *args], capture_output=True, text=True, timeout=30)


def pane_ids(server: str) -> list[str]:
    """Every pane of the server ([] when no server runs: tmux exits with its last pane)."""
    if not socket_path(server).exists():
        return []
    done = tmux(server, "list-panes", "-a", "-F", "#{pane_id}")
    if "no server running" in done.stderr or "error connecting" in done.stderr:
        return []
    assert done.returncode == 0, done.stderr
    return done.stdout.split()


def type_line(server: str, pane_id: str, text: str) -> None:
    """Type `text` into the pane as keystrokes, then press Enter (what a person would do)."""
    assert tmux(server, "send-keys", "-t", pane_id, "-l", "--", text).returncode == 0
    assert tmux(server, "send-keys", "-t", pane_id, "Enter").returncode == 0


def screen(server: str, pane_id: str) -> str:
    return tmux(server, "capture-pane", "-p", "-J", "-t", pane_id, "-S", "-").stdout


# -- processes and files ------------------------------------------------------------------------
def descendants(pid: int) -> set[int]:
    found: set[int] = set()
    todo = [pid]
    while todo:
        for child in children(todo.pop()):
            if child not in found:
                found.add(child)
                todo.append(child)
    return found


def tmux_servers_for(name: str) -> list[int]:
    """Pids of any tmux process whose command line names socket `name` (-L NAME or -S PATH, either
    as two arguments or as one, the way libtmux passes it: `-LNAME`)."""
    path = str(socket_path(name))
    names = {name, f"-L{name}", path, f"-S{path}"}
    pids = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        argv = cmdline(int(entry.name))
        if argv and Path(argv[0]).name.startswith("tmux") and names & set(argv):
            pids.append(int(entry.name))
    return pids


def files_under(root: Path) -> dict[str, tuple[int, int, int]]:
    """Every entry under root: relative path -> (mode, size, mtime_ns); empty if root is absent."""
    if not root.exists():
        return {}
    seen = {}
    for path in sorted(root.rglob("*")):
        st = path.lstat()
        seen[str(path.relative_to(root))] = (
            st.st_mode,
            st.st_size if path.is_file() else 0,
            st.st_mtime_ns if path.is_file() else 0,
        )
    return seen


SUBREAPER_RUN = """
import ctypes, json, os, subprocess, sys
ctypes.CDLL(None, use_errno=True).prctl(36, 1, 0, 0, 0)  # PR_SET_CHILD_SUBREAPER: orphans come to us
done = subprocess.run(sys.argv[1:], capture_output=True, text=True)
with open(f"/proc/{os.getpid()}/task/{os.getpid()}/children") as f:
    left = [int(p) for p in f.read().split()]
print(json.dumps({"rc": done.returncode, "stdout": done.stdout, "stderr": done.stderr, "left": left}))
"""


def run_catching_orphans(argv: list[str]) -> dict[str, Any]:
    """Run argv under a child-subreaper parent: anything it starts and leaves behind (even a
    daemon that double-forked) is reparented to that parent and reported in `left`."""
    done = subprocess.run([sys.executable, "-c", SUBREAPER_RUN, *argv], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def create_many(
    names: list[str], *, agent: str = "demo", timeout: float = 60.0, extra: tuple[str, ...] = ()
) -> dict[str, dict[str, Any]]:
    """Create sessions with concurrent `mam session create --json` processes; name -> row."""
    from tests.helpers.mamcli import spawn_mam

    procs = {
        name: spawn_mam("session", "create", "--agent", agent, "--role", "dev", "--session", name, "--json", *extra)
        for name in names
    }
    rows = {}
    for name, proc in procs.items():
        out, err = proc.communicate(timeout=timeout)
        assert proc.returncode == 0, f"create {name} exited {proc.returncode}: {err}"
        rows[name] = json.loads(out)
    return rows
