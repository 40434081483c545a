"""What the page shows, as JSON: `mam top`'s snapshot with the cells `mam top` prints, and the actions offered.

Nothing is derived here that `mam.view.model` or `mam.view.render` already says: the page displays
these cells as they are.
"""

from __future__ import annotations

from dataclasses import asdict
from typing import Any

from mam.view import render
from mam.view.model import Snapshot
from mam.web.actions import offered


def state_json(snap: Snapshot, *, notes: list[str] | None = None) -> dict[str, Any]:
    now = snap.taken_ms
    sessions = []
    for s in snap.sessions:
        row = asdict(s)
        row["dot"] = render.DOTS.get(s.state, "?")
        row["last"] = render.age(s.last_ms, now)
        row["actions"] = offered("session", row)
        sessions.append(row)
    jobs = []
    for j in snap.jobs:
        row = asdict(j)
        row["bars"] = [{"label": b.label, "fraction": b.fraction, "text": b.text()} for b in j.bars]
        row["cells"] = dict(zip(render.JOB_COLUMNS, render.job_cells(j, now)))
        row["actions"] = offered("job", row)
        jobs.append(row)
    loops = []
    for x in snap.loops:
        row = asdict(x)
        row["verdicts"] = [{"reviewer": r, "verdict": v} for r, v in x.verdicts]
        row["actions"] = offered("loop", row)
        loops.append(row)
    tasks = []
    for t in snap.tasks:  # a tree by parent: each parent before its subtasks, with its depth
        row = asdict(t)
        row["cells"] = dict(zip(render.TASK_COLUMNS, render.task_cells(t)))
        tasks.append(row)
    roles = []
    for r in snap.roles:
        row = asdict(r)
        row["cells"] = dict(zip(render.ROLE_COLUMNS, render.role_cells(r)))
        roles.append(row)
    return {
        "workspace": snap.workspace,
        "taken_ms": now,
        "header": render.header(snap),
        "broker": snap.broker,
        "sessions": sessions,
        "jobs": jobs,
        "loops": loops,
        "tasks": tasks,
        "roles": roles,
        "hold": snap.hold,
        "workspace_actions": offered("workspace", {"id": "all", "held": snap.hold is not None}),
        "dots": render.DOTS,
        "notes": list(notes or []),
    }
