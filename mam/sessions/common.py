"""What session operations share: name checks, the pane environment, backend lookup for a row."""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping
from pathlib import Path

from mam.ids import check_name
from mam.panes import open_backend
from mam.panes.base import PaneBackend
from mam.sessions.agent_env import without_secrets
from mam.settings import Settings
from mam.store.sessions import SessionRow
from mam.workspace import Workspace

__all__ = ["check_name", "pane_env"]  # check_name lives in mam.ids; re-exported for older callers


def pane_env(ws: Workspace, name: str, environ: Mapping[str, str]) -> dict[str, str]:
    """The creating command's environment without mam's secrets, with the workspace venv first on PATH
    and the mam variables set."""
    env = without_secrets(environ)
    first = ws.venv_bin if (ws.venv_bin / "mam").exists() else Path(sys.executable).parent
    parts = [p for p in env.get("PATH", os.defpath).split(os.pathsep) if p and p != str(first)]
    env["PATH"] = os.pathsep.join([str(first), *parts])
    env["MAM_WORKSPACE"] = str(ws.root)
    env["MAM_SESSION"] = name
    env.pop("MAM_AGENT_PID", None)
    env.pop("TMUX", None)
    env.pop("TMUX_PANE", None)
    return env


def backend_for(row: SessionRow, *, settings: Settings, ws: Workspace) -> PaneBackend:
    """The backend of the row's server, reached by the socket the row recorded (whoever asks, whatever
    their TMUX_TMPDIR or XDG_CONFIG_HOME); a row made before sockets were recorded: from this process's."""
    return open_backend(row.backend, row.server, settings=settings, ws=ws, socket=row.socket)
