"""Whether the workspace is held (`mam pause --all`, mam/jobs/pause.py): nothing of a routine fires while it is."""

from __future__ import annotations

import sqlite3

from mam.store import pauses


def workspace_hold(conn: sqlite3.Connection) -> str:
    """'' when nothing holds the workspace, else a short description of the hold."""
    held = pauses.hold(conn)
    if held is None:
        return ""
    return f"mam pause --all{' by ' + held.by if held.by else ''}"
