"""A session's activity for `status --json` and MCP: from its hooks when they spoke since the launch,
else from its open job's events, else from the process alone (never guessed from the screen).

    activity         working / waiting / idle / starting / unknown
    activity_source  hook / store / event / process (store: read from the CLI's own records, mam.hooks.store_watch)
    activity_at      when that was last said (seconds since the epoch; None when nothing said it)
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from mam.hooks import session_state
from mam.outcomes import JobState
from mam.store.sessions import SessionRow, SessionStatus
from mam.workspace import Workspace

LIVE = (SessionStatus.RUNNING, SessionStatus.STARTING)
SHOWN = {"working": "working", "waiting": "waiting", "idle": "idle", "ended": "unknown"}


def session_activity(ws: Workspace, row: SessionRow, open_job: Mapping[str, Any] | None) -> dict[str, Any]:
    """`open_job`: the `job` part of the session's delivered open job's row data (None if it has none)."""
    if row.status not in LIVE:
        return {"activity": "unknown", "activity_source": "process", "activity_at": row.updated_at or None}
    hook = session_state.read(ws, row.name)
    at = hook.get("at")
    if isinstance(at, (int, float)) and at >= (row.launched_at or 0) and hook.get("state") in SHOWN:
        out = {
            "activity": SHOWN[str(hook["state"])],
            "activity_source": str(hook.get("via") or "hook"),
            "activity_at": at,
        }
        if hook.get("state") == "waiting" and hook.get("waiting"):
            out["waiting"] = hook["waiting"]
        return out
    if open_job is not None and open_job.get("state") == JobState.RUNNING.value:
        last = open_job.get("last_event_ms") or open_job.get("started_ms")
        return {"activity": "working", "activity_source": "event", "activity_at": (last or 0) / 1000 or None}
    if row.status == SessionStatus.STARTING or not row.ready:
        return {"activity": "starting", "activity_source": "process", "activity_at": row.launched_at}
    return {"activity": "unknown", "activity_source": "process", "activity_at": None}
