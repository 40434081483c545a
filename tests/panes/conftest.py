"""Fixtures for the pane backend tests: one harness per backend, short herdr config dirs, process scans.

The `harness` fixture gives the same tests a tmux backend on the test's private tmux server and a
herdr backend on an in-process fake herdr server (tests/fakes/herdr_server.py).
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from mam.panes import tmux_control
from mam.panes.base import PaneBackend
from mam.panes.herdr import HerdrBackend
from mam.panes.tmux import TmuxBackend
from mam.panes.tmux import socket_path as tmux_socket
from mam.settings import Settings, load_settings
from mam.util.proc import children, pid_alive
from mam.workspace import Workspace
from tests.conftest import FAKES_BIN
from tests.fakes.herdr_server import FakeHerdr

PASTE_CAPTURE = Path(__file__).resolve().parent.parent / "fakes" / "paste_capture.py"


@dataclass
class Harness:
    kind: str
    backend: PaneBackend
    make: Callable[[str], PaneBackend]  # a backend object for another (never started) server
    socket_for: Callable[[str], Path]
    keeps_dead_panes: bool  # tmux keeps an exited program's pane (remain-on-exit); herdr closes it
    missing_pane: str  # a well-formed pane id that does not exist

    @property
    def socket(self) -> Path:
        return self.socket_for(self.backend.server)


@pytest.fixture
def short_config_home(monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """XDG_CONFIG_HOME in a short /tmp folder: herdr sockets live under it and sun_path holds 107 bytes."""
    folder = Path(tempfile.mkdtemp(prefix="mamh-", dir="/tmp"))
    monkeypatch.setenv("XDG_CONFIG_HOME", str(folder))
    yield folder
    shutil.rmtree(folder, ignore_errors=True)


def herdr_name() -> str:
    return f"mt-{uuid.uuid4().hex[:8]}"


def settings(**overrides: str) -> Settings:
    base = load_settings(env_file=None)
    return base.with_overrides(**overrides) if overrides else base


@pytest.fixture(params=["tmux", "tmux-control", "herdr"])
def harness(
    request: pytest.FixtureRequest, workspace: Workspace, tmux_server, short_config_home: Path
) -> Iterator[Harness]:
    if request.param.startswith("tmux"):
        if request.param == "tmux-control":  # as the node runs it: one control-mode client per server
            tmux_control.serve(workspace.run_dir / "tmux")
        try:
            yield Harness(
                kind="tmux",
                backend=TmuxBackend(tmux_server.name, settings=settings(), ws=workspace),
                make=lambda name: TmuxBackend(name, settings=settings(), ws=workspace),
                socket_for=tmux_socket,
                keeps_dead_panes=True,
                missing_pane="%999",
            )
        finally:
            tmux_control.close_all()
        return
    backend = HerdrBackend(herdr_name(), settings=settings(), ws=workspace)
    fake = FakeHerdr(backend.socket_path).start()

    def make(name: str) -> PaneBackend:
        return HerdrBackend(name, settings=settings(), ws=workspace)

    def socket_for(name: str) -> Path:
        return HerdrBackend(name, settings=settings(), ws=workspace).socket_path

    try:
        yield Harness("herdr", backend, make, socket_for, keeps_dead_panes=False, missing_pane="w9:p9")
    finally:
        fake.stop()


@pytest.fixture
def herdr_on_path(monkeypatch: pytest.MonkeyPatch) -> Path:
    """The fake `herdr` executable (and the fake agent CLIs) first on PATH."""
    monkeypatch.setenv("PATH", f"{FAKES_BIN}{os.pathsep}{os.environ['PATH']}")
    return FAKES_BIN / "herdr"


# -- processes ----------------------------------------------------------------------------------
def processes_mentioning(text: str) -> set[int]:
    """Pids of every process whose command line contains `text`."""
    found = set()
    needle = text.encode()
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                if needle in (entry / "cmdline").read_bytes():
                    found.add(int(entry.name))
            except OSError:
                continue
    return found


def descendants(pid: int | None = None) -> set[int]:
    """Every live descendant of `pid` (default: this test process)."""
    todo, seen = [pid or os.getpid()], set()
    while todo:
        for child in children(todo.pop()):
            if child not in seen and pid_alive(child):
                seen.add(child)
                todo.append(child)
    return seen


def fake_server_state(socket: Path) -> dict:
    """What the fake herdr executable recorded about itself beside its socket."""
    return json.loads((socket.parent / "fake-server.json").read_text())
