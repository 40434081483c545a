"""Pane backends: what owns the agents' terminals (tmux or herdr), behind one small protocol."""

from __future__ import annotations

from typing import TYPE_CHECKING

from mam.errors import ConfigError
from mam.panes.herdr import HerdrBackend
from mam.panes.tmux import TmuxBackend

if TYPE_CHECKING:
    from mam.panes.base import PaneBackend
    from mam.settings import Settings
    from mam.workspace import Workspace

BACKENDS = ("tmux", "herdr")


def default_server(kind: str, settings: Settings, ws: Workspace) -> str:
    """The server name a workspace uses for `kind` unless told otherwise."""
    configured = settings.get_str("MAM_TMUX_SERVER" if kind == "tmux" else "HERDR_SESSION_NAME").strip()
    return configured or f"mam-{ws.slug}"


def open_backend(kind: str, server: str, *, settings: Settings, ws: Workspace) -> PaneBackend:
    """A backend object for `server`; constructing it never starts anything."""
    if kind == "tmux":
        return TmuxBackend(server, settings=settings, ws=ws)
    if kind == "herdr":
        return HerdrBackend(server, settings=settings, ws=ws)
    raise ConfigError(f"unknown backend {kind!r}: use one of {', '.join(BACKENDS)}")
