"""`mam session attach NAME`: the command that puts this terminal on a session's pane.

tmux: inside a client of the same tmux server, `switch-client` to the pane; otherwise
`attach-session` to it (after selecting its window and pane). herdr: `herdr --session S`,
herdr's own client. Looking never starts anything: a session whose server is not running or
whose pane is gone is refused (exit 5) with the command that brings it back.
"""

from __future__ import annotations

import os
import subprocess
from collections.abc import Mapping
from pathlib import Path

from mam.errors import SessionNotFound
from mam.panes import open_backend
from mam.panes.herdr_config import config_dir
from mam.sessions.common import check_name
from mam.settings import Settings
from mam.store.registry import Registry
from mam.workspace import Workspace


def attach_argv(
    name: str, *, ws: Workspace, settings: Settings, environ: Mapping[str, str] | None = None
) -> list[list[str]]:
    """The commands to run, in order (the last one takes the terminal)."""
    environ = os.environ if environ is None else environ
    registry = Registry.open_existing(ws)
    if registry is None:
        raise SessionNotFound(f"no session {name!r} in workspace {ws.root} (it has no registry)", session=name)
    try:
        row = registry.session(check_name(name))
    finally:
        registry.close()
    looking = settings.with_overrides(MAM_NO_AUTOSTART="1")
    backend = open_backend(row.backend, row.server, settings=looking, ws=ws, socket=row.socket)
    pane = backend.pane(row.pane_id) if row.pane_id and backend.server_running() else None
    if pane is None:
        raise SessionNotFound(
            f"session {name!r} has no live pane (status {row.status}); bring it back with: "
            f"mam session resume --session {name}",
            session=name,
        )
    pane_id = pane.pane_id
    if row.backend == "herdr":
        herdr = [settings.herdr_bin or "herdr", "--session", row.server]
        home = Path(backend.socket).parent.parent.parent.parent  # <XDG_CONFIG_HOME>/herdr/sessions/NAME/herdr.sock
        if row.socket and home != config_dir(settings, environ).parent:
            return [["env", f"XDG_CONFIG_HOME={home}", *herdr]]  # the herdr the row recorded, not this one's
        return [herdr]
    # By the socket the row recorded (`-S`): the server it was made on, whatever this terminal's TMUX_TMPDIR.
    tmux = ["tmux", "-S", row.socket] if row.socket else ["tmux", "-L", row.server]
    inside = environ.get("TMUX", "").split(",")[0]
    if inside and os.path.realpath(inside) == os.path.realpath(backend.socket):
        return [[*tmux, "switch-client", "-t", pane_id]]
    return [
        [*tmux, "select-window", "-t", pane_id],
        [*tmux, "select-pane", "-t", pane_id],
        [*tmux, "attach-session", "-t", pane_id],
    ]


def attach(name: str, *, ws: Workspace, settings: Settings) -> None:
    """Run the commands; the last replaces this process (it returns only on error)."""
    steps = attach_argv(name, ws=ws, settings=settings)
    last = _prepare(steps)
    os.execvpe(last[0], last, _attach_env(last))


def run_attach(steps: list[list[str]]) -> int:
    """Run the commands (as attach_argv gives them) and wait: the last one returns when the person
    detaches (`mam top` then shows itself again). Its exit status."""

    last = _prepare(steps)
    return subprocess.run(last, env=_attach_env(last), check=False).returncode


def _prepare(steps: list[list[str]]) -> list[str]:

    for argv in steps[:-1]:
        subprocess.run(argv, check=False, capture_output=True)
    return steps[-1]


def _attach_env(last: list[str]) -> dict[str, str]:
    # attach-session from inside another tmux server's client: tmux refuses unless TMUX is unset.
    return dict(os.environ) if "switch-client" in last else {k: v for k, v in os.environ.items() if k != "TMUX"}
