"""A session's last hook activity: `.mam/sessions/<name>/activity.json` (0600), written by `mam hook`.

It holds the last state a hook reported (working / waiting / idle / ended), when, from which hook,
and what the hooks told about the conversation (its id and transcript path, from SessionStart).
It is a file of its own rather than registry columns: a hook must be cheap and never wait on the
registry's writers; `status --json` reads it next to the session row.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

from mam.hooks.translate import Activity
from mam.util.fs import atomic_write_json
from mam.workspace import Workspace

FILE = "activity.json"


def path(ws: Workspace, session: str) -> Path:
    return ws.session_dir(session) / FILE


def read(ws: Workspace, session: str) -> dict[str, Any]:
    try:
        data = json.loads(path(ws, session).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def record(ws: Workspace, session: str, act: Activity, *, job: str = "", via: str = "hook") -> dict[str, Any]:
    """Merge one activity into the session's file (the last writer wins: hooks of one agent come in order).
    `via`: "hook" (the CLI called `mam hook`) or "store" (read from the CLI's own records: mam.hooks.store_watch)."""
    data = read(ws, session)
    was_waiting = data.get("state") == "waiting" and data.get("job", "") == job
    data.update({"state": act.state, "source": act.source, "at": time.time(), "tool": act.tool, "job": job, "via": via})
    data["waiting"] = {"tool": act.tool, "message": act.message} if act.state == "waiting" else None
    # when this wait began: a second hook about the same wait (Notification after PermissionRequest) keeps it
    if act.state != "waiting":
        data["waiting_since"] = None
    elif not (was_waiting and data.get("waiting_since")):
        data["waiting_since"] = data["at"]
    if act.conversation_id:
        data["conversation_id"] = act.conversation_id
    if act.transcript_path:
        data["transcript_path"] = act.transcript_path
    if act.turn_end:
        data["turn_end_at"] = data["at"]
    folder = ws.session_dir(session)
    folder.mkdir(mode=0o700, parents=True, exist_ok=True)
    atomic_write_json(path(ws, session), data, mode=0o600, fsync=False)
    return data
