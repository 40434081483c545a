"""The cells of `mam top`'s tables, and the whole view as plain text (`mam top --snapshot`).

The TUI and the snapshot show the same cells, so a snapshot is what the screen said.
"""

from __future__ import annotations

import time

from mam.remote.fleet import FleetRow
from mam.store.sessions import SessionStatus
from mam.view.model import JobView, LoopView, RoleView, RoutineView, SessionView, Snapshot, TaskView

DOTS = {
    "working": "●",
    "waiting": "◉",
    "idle": "○",
    "starting": "◌",
    "stopped": "■",
    "terminated": "✕",
}
COLOURS = {
    "working": "green",
    "waiting": "bold yellow",
    "idle": "cyan",
    "starting": "blue",
    "stopped": "grey50",
    "terminated": "red",
}
SESSION_COLUMNS = ("", "SESSION", "AGENT", "ROLE", "STATE", "FROM", "JOB", "LAST")
JOB_COLUMNS = ("JOB", "SESSION", "STATE", "AGE", "QUIET", "START", "LIVENESS", "WALL", "MESSAGE")
LOOP_COLUMNS = ("LOOP", "STATE", "ROUND", "CREATOR", "VERDICTS")
ROUTINE_COLUMNS = ("ROUTINE", "STATE", "SCHEDULE", "NEXT TICK", "LAST", "TARGET")
TASK_COLUMNS = ("TASK", "STATE", "ROLE", "JOB", "TITLE")
ROLE_COLUMNS = ("ROLE", "SESSION", "REPORTS TO", "RUNS TODAY", "BREAKER")
HOST_COLUMNS = ("NODE", "HOST", "STATE", "SINCE", "LAST SEEN", "SESSIONS", "JOBS")


def age(ms: int | None, now_ms: int) -> str:
    if not ms:
        return "-"
    s = max(0, (now_ms - ms) // 1000)
    if s < 60:
        return f"{s}s"
    if s < 3600:
        return f"{s // 60}m{s % 60:02d}s"
    if s < 86400:
        return f"{s // 3600}h{s % 3600 // 60:02d}m"
    return f"{s // 86400}d"


def session_cells(s: SessionView, now_ms: int) -> tuple[str, ...]:
    return (DOTS.get(s.state, "?"), s.name, s.agent, s.role, s.state, s.source, s.job or "-", age(s.last_ms, now_ms))


def job_cells(j: JobView, now_ms: int) -> tuple[str, ...]:
    state = j.state + (f" #{j.queued}" if j.queued else "") + (" (waiting)" if j.waiting else "")
    if j.paused:
        state += f" ({j.paused.get('mode', '')})"
    start, live, wall = (b.text() for b in j.bars)
    return (
        j.id,
        j.session,
        state,
        age(j.created_ms, now_ms),
        age(j.last_event_ms, now_ms),
        start,
        live,
        wall,
        j.message.splitlines()[0] if j.message else "",
    )


def loop_cells(loop: LoopView) -> tuple[str, ...]:
    verdicts = ", ".join(f"{r}: {v}" for r, v in loop.verdicts) or "-"
    return (loop.id, loop.state, str(loop.rounds), loop.creator or "-", verdicts)


def routine_cells(r: RoutineView) -> tuple[str, ...]:
    return (r.name, r.state, r.schedule, r.next_tick, r.last, r.target)


def task_cells(t: TaskView) -> tuple[str, ...]:
    """A task: its state with what holds it (a todo one) or what it waits on (a blocked one); its title indented by
    its depth in the tree by parent."""
    state = t.state + (f" ({t.queued_for})" if t.queued_for else "") + (f" (on {t.wait})" if t.wait else "")
    return (t.id, state, t.role, t.job or "-", "  " * t.depth + t.title)


def role_cells(r: RoleView) -> tuple[str, ...]:
    cap = f"{r.runs_today}/{r.daily_runs}" if r.daily_runs is not None else str(r.runs_today)
    breaker = f"TRIPPED ({r.failures} failed): mam role reset {r.name}" if r.tripped else f"{r.failures}/{r.breaker}"
    return (r.name, r.session, r.reports_to or "-", cap, breaker)


def host_cells(h: FleetRow, now_ms: int) -> tuple[str, ...]:
    """A node of the fleet: its state (and why offline), for how long, when last heard, sessions running / all."""
    running = sum(1 for s in h.sessions if s.get("state") == SessionStatus.RUNNING.value)
    state = h.state + (f" ({h.offline_by})" if h.offline_by else "")
    return (h.name, h.host or "-", state, age(h.since_ms, now_ms), age(h.last_seen_ms, now_ms),
            f"{running}/{len(h.sessions)}", str(len(h.jobs)))  # fmt: skip


def host_detail(h: FleetRow, now_ms: int) -> str:
    """What picking a host shows: its sessions with their state and its open jobs."""
    sessions = ", ".join(f"{s.get('name')} {s.get('state')}" for s in h.sessions) or "none"
    jobs = " ".join(h.jobs) or "none"
    where = f"{h.host or '?'}, pid {h.pid or '?'}, {h.workspace or '?'}"
    return f"{h.name} ({where}): {host_cells(h, now_ms)[2]}\nsessions: {sessions}\nopen jobs: {jobs}"


def fit(
    headers: tuple[str, ...], rows: list[tuple[str, ...]], width: int, *, keep: int = -1, keep_min: int = 20
) -> list[tuple[str, ...]]:
    """Cut cells so the table fits `width` columns (2 of padding per column, 2 for a scroll bar): the
    widest columns shrink first, none below its header, and column `keep` (e.g. the message) not
    below `keep_min`; a cut cell ends with an ellipsis."""
    n = len(headers)
    keep = keep % n
    natural = [max([len(h)] + [len(r[i]) for r in rows]) for i, h in enumerate(headers)]
    floor = [min(natural[i], max(len(h), 3)) for i, h in enumerate(headers)]
    floor[keep] = min(natural[keep], max(keep_min, len(headers[keep])))
    widths = natural[:]
    excess = sum(widths) - (width - 2 * n - 2)
    while excess > 0:
        shrinkable = [i for i in range(n) if widths[i] > floor[i]]
        if not shrinkable:
            break
        i = max(shrinkable, key=lambda i: widths[i] - floor[i])
        step = min(excess, widths[i] - floor[i], max(1, (widths[i] - floor[i]) // 2))
        widths[i] -= step
        excess -= step
    return [tuple(cut(cell, widths[i]) for i, cell in enumerate(row)) for row in rows]


def cut(text: str, width: int) -> str:
    return text if len(text) <= width else text[: max(0, width - 1)] + "…"


def header(snap: Snapshot) -> str:
    broker = {
        "up": "broker up",
        "down": "broker DOWN (reading the registry)",
        "idle": "broker not running (the next job starts it)",
    }.get(snap.broker, "broker ?")
    clock = time.strftime("%H:%M:%S", time.localtime(snap.taken_ms / 1000))
    held = f"  HELD ({snap.hold.get('mode')}, by {snap.hold.get('by')}: mam resume --all)" if snap.hold else ""
    tripped = [r.name for r in snap.roles if r.tripped]
    if tripped:
        held += f"  BREAKER TRIPPED: {', '.join(tripped)} (mam role reset ROLE)"
    return f"mam top  {broker}{held}  {clock}  {snap.workspace}"


def _table(columns: tuple[str, ...], rows: list[tuple[str, ...]]) -> list[str]:
    widths = [max([len(c)] + [len(r[i]) for r in rows]) for i, c in enumerate(columns)]

    def fmt(cells: tuple[str, ...]) -> str:
        return "  ".join(c.ljust(w) for c, w in zip(cells, widths)).rstrip()

    return [fmt(columns)] + [fmt(r) for r in rows]


def plain(snap: Snapshot, width: int = 120) -> str:
    now = snap.taken_ms
    lines = [header(snap), ""]
    lines.append(f"SESSIONS ({len(snap.sessions)})")
    lines += _table(SESSION_COLUMNS, [session_cells(s, now) for s in snap.sessions]) if snap.sessions else ["  none"]
    lines.append("")
    lines.append(f"OPEN JOBS ({len(snap.jobs)})")
    lines += _table(JOB_COLUMNS, [job_cells(j, now) for j in snap.jobs]) if snap.jobs else ["  none"]
    lines.append("")
    lines.append(f"LOOPS ({len(snap.loops)})")
    lines += _table(LOOP_COLUMNS, [loop_cells(x) for x in snap.loops]) if snap.loops else ["  none"]
    if snap.routines:
        lines.append("")
        lines.append(f"ROUTINES ({len(snap.routines)})")
        lines += _table(ROUTINE_COLUMNS, [routine_cells(r) for r in snap.routines])
    if snap.roles or snap.tasks:
        lines.append("")
        lines.append(f"TASKS ({len(snap.tasks)})")
        lines += _table(TASK_COLUMNS, [task_cells(t) for t in snap.tasks]) if snap.tasks else ["  none"]
        lines.append("")
        lines.append(f"ROLES ({len(snap.roles)})")
        lines += _table(ROLE_COLUMNS, [role_cells(r) for r in snap.roles]) if snap.roles else ["  none"]
    lines.append("")
    lines.append("dots: " + "  ".join(f"{d} {s}" for s, d in DOTS.items()))
    return "\n".join(line[:width] for line in lines) + "\n"
