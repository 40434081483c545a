"""A workspace whose embedded broker (`mam broker start`, or any mam process that needs one) is
stopped when the test ends: by `mam broker stop`, else by the pid its state file names, and only
if that pid is still a `mam.broker.serve` process."""

from __future__ import annotations

import json
import os
import signal
from collections.abc import Iterator
from pathlib import Path

import pytest

from mam.util import proc
from tests.helpers.mamcli import mam
from tests.helpers.tmux import kill_stray_default_server, private_tmux


def gone(pid: int) -> bool:
    """No such process, or only a zombie waiting for init to reap it."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return True
    return stat[stat.rfind(")") + 2 :].split()[0] == "Z"


def embedded_workspace(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """For a fixture to `yield from`: a workspace with no broker configured (MAM_WORKSPACE names
    it) and a private tmux server (MAM_TMUX_SERVER); its embedded broker is always stopped
    afterwards, and its tmux server killed. A tmux server mam named by itself (`mam-<slug>`: a
    command without MAM_TMUX_SERVER) fails the test, once killed: no run leaves one behind."""
    root = tmp_path / "ws"
    root.mkdir()
    tmux = private_tmux()
    monkeypatch.setenv("MAM_WORKSPACE", str(root))
    monkeypatch.setenv("MAM_TMUX_SERVER", tmux.name)
    try:
        yield root
    finally:
        tmux.kill()
        state = root / ".mam" / "broker" / "broker.json"
        pid = json.loads(state.read_text()).get("pid") if state.exists() else None
        mam("broker", "stop")
        if isinstance(pid, int) and not gone(pid) and "mam.broker.serve" in " ".join(proc.cmdline(pid)):
            os.kill(pid, signal.SIGKILL)  # only the broker this test started, by its pid
    stray = kill_stray_default_server(root)
    if stray:
        pytest.fail(f"the test started tmux server {stray} outside its private one (MAM_TMUX_SERVER lost)")
