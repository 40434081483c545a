"""What `mam top` shows, as plain data: sessions with a state dot, open jobs with deadline bars, loops.

`snapshot()` reads the registry, the panes (listing only: it starts no server) and the loop logs.
It is pure reading; rendering (`render.py`, `top.py`) never reads anything itself.

Fields that later parts of mam add are shown when the rows carry them and skipped when they do
not: a session's `activity` / `activity_source` / `activity_at` (from the agent CLI's hooks) and a
job's `waiting: {since, tool, message}` sub-state.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass, field
from typing import Any

from mam.errors import MamError
from mam.outcomes import UNCLAIMED_STATES, JobState
from mam.settings import Settings
from mam.store import jobs as jobs_table
from mam.store import pauses
from mam.util.text import for_terminal
from mam.workspace import Workspace

HOOK_STATES = ("working", "waiting", "idle")


@dataclass(frozen=True)
class Bar:
    label: str  # start / liveness / wall
    fraction: float | None  # None: does not apply now

    def text(self, width: int = 8) -> str:
        if self.fraction is None:
            return "-"
        f = max(0.0, min(self.fraction, 1.0))  # (a clock a few ms behind the wrapper's reads as 0)
        full = round(f * width)
        return "█" * full + "░" * (width - full) + f" {max(0.0, min(self.fraction, 9.99)) * 100:3.0f}%"


@dataclass(frozen=True)
class SessionView:
    name: str
    agent: str
    role: str
    status: str
    state: str  # working / waiting / idle / starting / stopped / terminated (render.DOTS)
    source: str  # hook / event / job / process / registry
    job: str
    last_ms: int | None
    note: str = ""
    backend: str = "tmux"
    waiting_tool: str = ""  # the tool call a permission prompt holds up (from the hooks), while waiting


@dataclass(frozen=True)
class JobView:
    id: str
    session: str
    state: str
    created_ms: int
    last_event_ms: int | None
    bars: tuple[Bar, Bar, Bar]
    message: str
    queued: int | None  # position among the session's waiting jobs (1 = next), None when not waiting
    waiting: dict[str, Any] | None = None
    paused: dict[str, Any] | None = None  # while paused: {mode, since, by} (mam job pause)


@dataclass(frozen=True)
class LoopView:
    id: str
    state: str
    rounds: int
    creator: str
    verdicts: tuple[tuple[str, str], ...]  # (reviewer, verdict) of the latest round so far


@dataclass(frozen=True)
class RoutineView:
    name: str
    state: str  # enabled / paused
    schedule: str
    next_tick: str  # UTC ISO, or "-"
    last: str  # the last receipt: its status and outcome or reason
    target: str


@dataclass(frozen=True)
class TaskView:
    id: str
    title: str
    role: str
    state: str  # todo / running / blocked / in_review / done / failed / cancelled
    queued_for: str  # what holds a todo task (mam.org.rules), else ""
    wait: str  # the task a blocked one waits on, else ""
    job: str
    depth: int  # its place in the tree by parent (0: no parent)
    parent: str


@dataclass(frozen=True)
class RoleView:
    name: str
    session: str
    reports_to: str
    runs_today: int
    daily_runs: int | None  # None: no cap of its own
    failures: int
    breaker: int  # the failures in a row that trip it
    tripped: bool


@dataclass
class Snapshot:
    workspace: str
    taken_ms: int
    sessions: list[SessionView] = field(default_factory=list)
    jobs: list[JobView] = field(default_factory=list)
    loops: list[LoopView] = field(default_factory=list)
    broker: str = "unknown"  # up / down / idle (the embedded broker, not running) / unknown
    routines: list[RoutineView] = field(default_factory=list)
    hold: dict[str, Any] | None = None  # `mam pause --all`: {mode, since, by}; None when not held
    tasks: list[TaskView] = field(default_factory=list)  # the org's tasks, as a tree by parent (mam/org)
    roles: list[RoleView] = field(default_factory=list)


def _ms(seconds: float | None) -> int | None:
    return int(seconds * 1000) if seconds else None


def bars_of(job: dict[str, Any], now_ms: int) -> tuple[Bar, Bar, Bar]:
    state = job.get("state")
    delivered = job.get("delivered_ms")
    start = liveness = wall = None
    if delivered and state in (JobState.DELIVERED.value, JobState.RUNNING.value):
        budget = job.get("budget_ms") or 0
        wall = (now_ms - delivered - (job.get("paused_total_ms") or 0)) / budget if budget else None
        if state == JobState.DELIVERED.value and job.get("start_deadline_ms"):
            start = (now_ms - (job.get("resumed_ms") or delivered)) / job["start_deadline_ms"]
        if state == JobState.RUNNING.value:
            quiet_for = now_ms - (job.get("last_event_ms") or job.get("started_ms") or delivered)
            limit = (job.get("heartbeat_ms") or 0) * float(job.get("heartbeat_k") or 0)
            liveness = quiet_for / limit if limit else None
    return Bar("start", start), Bar("liveness", liveness), Bar("wall", wall)


def session_state(row: dict[str, Any], open_job: dict[str, Any] | None) -> tuple[str, str]:
    """(state dot, where it came from) for one `session status` row and its open job."""
    status = str(row.get("status", ""))
    if status in ("stopped", "terminated", "starting"):
        return status, "registry"
    if row.get("activity") in HOOK_STATES:
        return str(row["activity"]), str(row.get("activity_source") or "hook")
    if not row.get("pane_alive", True):
        return "terminated", "process"
    if open_job is not None:
        if open_job.get("waiting"):
            return "waiting", "event"
        if open_job.get("state") == JobState.RUNNING.value:
            return "working", "event"  # its `started` (and later events) came
        if open_job.get("state") in ("delivering", "delivered"):
            return "working", "job"  # handed a brief, no `started` yet
    return "idle", "process"


def _last_progress(conn: Any, job_id: str) -> str:
    raw = jobs_table.last_progress_raw(conn, job_id)
    if raw is None:
        return ""
    try:
        return str((json.loads(raw).get("body") or {}).get("message", "") or "")
    except (ValueError, AttributeError):
        return ""


def snapshot(ws: Workspace, settings: Settings, *, broker: str = "unknown") -> Snapshot:
    from mam.jobs.queries import job_view
    from mam.sessions.status import session_status
    from mam.store.registry import Registry

    now = int(time.time() * 1000)
    snap = Snapshot(workspace=str(ws.root), taken_ms=now, broker=broker)
    rows = session_status(ws=ws, settings=settings.with_overrides(MAM_NO_AUTOSTART="1"))
    open_jobs: list[dict[str, Any]] = []
    last_by_session: dict[str, int] = {}
    messages: dict[str, str] = {}
    registry = Registry.open_existing(ws)
    if registry is not None:
        try:
            with registry.read() as conn:
                rows_open = jobs_table.open_jobs(conn)
                found = pauses.of(conn, [r.id for r in rows_open if r.state == JobState.PAUSED.value])
                open_jobs = [job_view(r, found.get(r.id)) for r in rows_open]
                held = pauses.hold(conn)
                snap.hold = held.as_dict() if held is not None else None
                for r in jobs_table.list_jobs(conn, limit=500):
                    at = r.data.get("job", {}).get("last_event_ms") or _ms(r.ended_at) or _ms(r.created_at) or 0
                    last_by_session[r.session] = max(last_by_session.get(r.session, 0), int(at))
                for j in open_jobs:
                    messages[j["id"]] = _last_progress(conn, j["id"])
        finally:
            registry.close()
    by_session: dict[str, list[dict[str, Any]]] = {}
    for j in sorted(open_jobs, key=lambda j: j.get("created_ms") or 0):
        by_session.setdefault(j["session"], []).append(j)
    for row in rows:
        current = next((j for j in by_session.get(row["name"], []) if j["state"] not in UNCLAIMED_STATES), None)
        current = current or next(iter(by_session.get(row["name"], [])), None)
        state, source = session_state(row, current)
        activity_at = row.get("activity_at")
        last = last_by_session.get(row["name"])
        if isinstance(activity_at, (int, float)):
            last = max(last or 0, int(activity_at * 1000 if activity_at < 1e11 else activity_at))
        snap.sessions.append(
            SessionView(
                name=row["name"],
                agent=str(row.get("agent", "")),
                role=str(row.get("role", "")),
                status=str(row.get("status", "")),
                state=state,
                source=source,
                job=current["id"] if current else "",
                last_ms=last,
                note=str(row.get("drift") or ""),
                backend=str(row.get("backend", "tmux")),
                waiting_tool=str((row.get("waiting") or {}).get("tool") or "") if state == "waiting" else "",
            )
        )
    for session, jobs in by_session.items():
        waiting = [j for j in jobs if j["state"] in UNCLAIMED_STATES]
        for j in jobs:
            waiting_info = j.get("waiting") if isinstance(j.get("waiting"), dict) else None
            message = (waiting_info or {}).get("message") or messages.get(j["id"], "")
            snap.jobs.append(
                JobView(
                    id=j["id"],
                    session=session,
                    state=j["state"],
                    created_ms=int(j.get("created_ms") or now),
                    last_event_ms=j.get("last_event_ms"),
                    bars=bars_of(j, now),
                    message=for_terminal(message),
                    queued=waiting.index(j) + 1 if j in waiting else None,
                    waiting=waiting_info,
                    paused=j.get("paused"),
                )
            )
    snap.jobs.sort(key=lambda j: j.created_ms)
    snap.loops = loops(ws)
    snap.routines = routines(ws)
    snap.tasks, snap.roles = org(ws, settings)
    return snap


def org(ws: Workspace, settings: Settings, *, keep_ended: int = 20) -> tuple[list[TaskView], list[RoleView]]:
    """The org's tasks (those not ended, and the last `keep_ended` that ended, as a tree by parent) and roles."""
    from mam.org.manage import list_roles, list_tasks
    from mam.store.org import OPEN_TASK_STATES
    from mam.store.registry import Registry

    registry = Registry.open_existing(ws)
    if registry is None:
        return [], []
    try:
        tasks, roles = list_tasks(registry, settings), list_roles(registry)
    finally:
        registry.close()
    ended = sorted((t for t in tasks if t["state"] not in OPEN_TASK_STATES), key=lambda t: t["updated_at"])
    shown = {t["id"] for t in tasks if t["state"] in OPEN_TASK_STATES} | {t["id"] for t in ended[-keep_ended:]}
    task_views = [
        TaskView(
            id=t["id"],
            title=for_terminal(t["title"]),
            role=t["role"],
            state=t["state"],
            queued_for=t["queued_for"],
            wait=t["wait"] or "",
            job=t["job"] or "",
            depth=int(t["depth"]),
            parent=t["parent"] or "",
        )
        for t in tasks
        if t["id"] in shown
    ]
    role_views = [
        RoleView(
            name=r["name"],
            session=r["session"],
            reports_to=r["reports_to"] or "",
            runs_today=int(r["runs_today"]),
            daily_runs=r["daily_runs"],
            failures=int(r["breaker"]["failures"]),
            breaker=int(r["breaker"]["threshold"]),
            tripped=bool(r["breaker"]["tripped"]),
        )
        for r in roles
    ]
    return task_views, role_views


def routines(ws: Workspace) -> list[RoutineView]:
    """The workspace's routines with their next tick and last receipt (mam.routines)."""
    from mam.routines.manage import list_routines
    from mam.store.registry import Registry

    registry = Registry.open_existing(ws)
    if registry is None:
        return []
    try:
        rows = list_routines(registry)
    finally:
        registry.close()
    out = []
    for r in rows:
        last = r["last"] or {}
        shown = " ".join(str(x) for x in (last.get("status"), last.get("outcome") or last.get("reason")) if x)
        out.append(
            RoutineView(
                name=r["name"],
                state=r["state"],
                schedule=r["schedule"],
                next_tick=r["next_tick"] or "-",
                last=shown or "-",
                target=r["target"],
            )
        )
    return out


def loops(ws: Workspace, limit: int = 10) -> list[LoopView]:
    from mam.loop.status import loop_status

    folder = ws.state / "loops"
    if not folder.is_dir():
        return []
    out = []
    for path in sorted(folder.glob("*/loop.jsonl"), key=lambda p: p.stat().st_mtime)[-limit:]:
        try:
            st = loop_status(ws, path.parent.name)
        except (MamError, OSError, ValueError, KeyError):
            continue
        last = st["history"][-1]["reviews"] if st["history"] else []
        out.append(
            LoopView(
                id=st["id"],
                state=st["state"],
                rounds=int(st["rounds"]),
                creator=str(st.get("creator") or ""),
                verdicts=tuple((str(r.get("reviewer")), str(r.get("verdict"))) for r in last),
            )
        )
    return out
