"""A session's recent screen as plain text, for a person to read (`mam web`): read-only, control sequences removed.

Looking starts nothing: a session with no pane, or whose tmux server is gone, has an empty screen.
"""

from __future__ import annotations

import re

from mam.errors import SessionNotFound
from mam.ids import check_name
from mam.sessions.common import backend_for
from mam.settings import Settings
from mam.store.registry import Registry
from mam.workspace import Workspace

# CSI / OSC / other ESC sequences, then any C0 or C1 control left except newline and tab.
_SEQUENCES = re.compile(
    r"\x1b\[[0-?]*[ -/]*[@-~]"  # CSI
    r"|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)?"  # OSC, ended by BEL or ST
    r"|\x1b[ -/]*[0-~]"  # any other ESC sequence (charset, RIS, DECSC...)
    r"|\x9b[0-?]*[ -/]*[@-~]"  # C1 CSI
)
_CONTROLS = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")


def strip_controls(text: str) -> str:
    """`text` with no escape sequence and no control character but newline and tab."""
    return _CONTROLS.sub("", _SEQUENCES.sub("", text.replace("\r\n", "\n")))


def recent_screen(name: str, *, ws: Workspace, settings: Settings, lines: int = 60) -> str:
    """The last `lines` lines of session `name`'s pane, stripped; SessionNotFound for an unknown name."""
    check_name(name)
    registry = Registry.open_existing(ws)
    row = None
    if registry is not None:
        try:
            row = registry.find_session(name)
        finally:
            registry.close()
    if row is None:
        raise SessionNotFound(f"no session {name!r} in this workspace")
    if not row.pane_id:
        return ""
    backend = backend_for(row, settings=settings, ws=ws)
    return strip_controls(backend.capture(row.pane_id, lines=lines)).rstrip("\n") + "\n"
