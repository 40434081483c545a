"""Pane backends: what owns the agents' terminals (tmux or herdr), behind one small protocol."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from mam.errors import ConfigError
from mam.panes.tmux import TmuxBackend

if TYPE_CHECKING:
    from mam.panes.base import PaneBackend
    from mam.settings import Settings
    from mam.workspace import Workspace

BACKENDS = ("tmux", "herdr")


def default_server(kind: str, settings: Settings, ws: Workspace) -> str:
    """The server name a workspace uses for `kind` unless told otherwise."""
    configured = (settings.tmux_server if kind == "tmux" else settings.herdr_session_name).strip()
    return configured or f"mam-{ws.slug}"


def open_backend(kind: str, server: str, *, settings: Settings, ws: Workspace, socket: str = "") -> PaneBackend:
    """A backend object for `server`; constructing it never starts anything. `socket`: the server's
    socket as a session's row recorded it, reached whatever this process's environment says ("": found
    from this process's environment, as for a new session; its `socket` is then the one to record)."""
    if kind == "tmux":
        return TmuxBackend(server, settings=settings, ws=ws, socket=socket)
    if kind == "herdr":
        from mam.panes.herdr import HerdrBackend  # its client, config (tomllib) and launcher: herdr sessions only

        return HerdrBackend(server, settings=settings, ws=ws, socket=socket)
    raise ConfigError(f"unknown backend {kind!r}: use one of {', '.join(BACKENDS)}")


def socket_gone(kind: str, socket: str) -> bool:
    """True when the folder a recorded socket was made under is gone (a temporary TMUX_TMPDIR, a herdr
    config folder removed): no server runs there and none can start there. "" (nothing recorded): False."""
    if not socket:
        return False
    path = Path(socket)
    top = path.parents[1] if kind == "tmux" else path.parents[2]  # $TMUX_TMPDIR; <config dir> of .../sessions/NAME/
    return not top.is_dir()
