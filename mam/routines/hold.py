"""Whether the workspace is held (`mam pause --all`): nothing of a routine fires while it is.

`mam pause --all` does not exist yet (its issue). Until it does, this reads the one place it is to
keep its hold, the registry's `meta` row `hold` (JSON: `{"mode": ..., "since": ..., "by": ...}`;
no row, or an empty value: no hold); the command that sets it should write there, or change this
function, which is the only reader routines have.
"""

from __future__ import annotations

import json
import sqlite3

from mam.store.routines import meta

HOLD_KEY = "hold"


def workspace_hold(conn: sqlite3.Connection) -> str:
    """'' when nothing holds the workspace, else a short description of the hold."""
    value = meta(conn, HOLD_KEY)
    if not value:
        return ""
    try:
        data = json.loads(value)
    except ValueError:
        return "held"
    if not isinstance(data, dict) or not data:
        return "held" if data else ""
    by = f" by {data['by']}" if data.get("by") else ""
    return f"mam pause --all{by}"
