"""`mam budget` and the MCP tool `budget_status`: every cap with what it holds, per session and per
role, running and queued counts, and the tokens dedup saved.

For each token cap: `committed` (spent for good), `reserved` (held by jobs in flight), `used`
(committed + reserved: what counts against the cap) and `remaining` (limit - used, never below 0;
None without a limit).
"""

from __future__ import annotations

import sqlite3
from typing import Any

from mam.governor import budget
from mam.outcomes import OPEN_STATES, JobState
from mam.settings import Settings
from mam.store import jobs as jobs_table
from mam.store import reservations as rs
from mam.store import sessions as sessions_table
from mam.store.registry import Registry


def tokens_saved_by_dedup(conn: sqlite3.Connection) -> int:
    """Tokens not spent thanks to dedup / idempotency keys: for each job, the delegations that attached
    to it (its audit rows of kind `attached`) times the tokens it committed."""
    attached = rs.attaches(conn)
    saved = 0
    for job_id, n in attached.items():
        row = rs.find(conn, job_id)
        if row is not None and row.status == rs.COMMITTED:
            saved += n * row.committed
    return saved


def _cap(name: str, limit: int, committed: int, reserved: int, **extra: Any) -> dict[str, Any]:
    used = committed + reserved
    return {
        "name": name,
        **extra,
        "limit": limit or None,
        "committed": committed,
        "reserved": reserved,
        "used": used,
        "remaining": max(limit - used, 0) if limit else None,
    }


def budget_status(registry: Registry, settings: Settings) -> dict[str, Any]:
    """The whole picture; reservations of jobs that ended under a dead wrapper are settled first."""
    with registry.write() as conn:
        budget.settle_orphans(conn)
    with registry.read() as conn:
        rows = rs.unsettled(conn)
        sc = budget.scope(conn, rows)
        by_session = rs.committed_by(conn, "session")
        by_role = rs.committed_by(conn, "role")
        sessions = sessions_table.list_all(conn)
        queued_jobs = jobs_table.sessions_in_state(conn, JobState.QUEUED.value)
        saved = tokens_saved_by_dedup(conn)
    running = [r for r in rows if r.status == rs.HELD and r.job_state in OPEN_STATES]
    queued_by_session: dict[str, int] = {}
    for name in queued_jobs:
        queued_by_session[name] = queued_by_session.get(name, 0) + 1
    role_of = {s.name: s.role for s in sessions}
    caps = [
        _cap("lifetime", settings.token_budget, sc.committed, sc.reserved),
        _cap("daily", settings.token_budget_daily, sc.committed_today, sc.reserved, day=rs.utc_day()),
    ]
    names = sorted({s.name for s in sessions} | set(by_session) | {r.session for r in rows})
    session_rows = []
    for name in names:
        row = next((s for s in sessions if s.name == name), None)
        limit = row.token_budget if row is not None else 0
        session_rows.append(
            {
                "session": name,
                "role": role_of.get(name, ""),
                **_cap("session", limit, by_session.get(name, 0), sc.reserved_by_session.get(name, 0)),
                "running": sum(1 for r in running if r.session == name),
                "queued": queued_by_session.get(name, 0),
            }
        )
    roles = sorted(({s.role for s in sessions} | {r.role for r in rows} | set(by_role)) - {""})
    role_rows = []
    for role in roles:
        role_rows.append(
            {
                "role": role,
                "max_running_jobs": settings.max_running_for_role(role) or None,
                "running": sum(1 for r in running if r.role == role),
                "queued": sum(n for s, n in queued_by_session.items() if role_of.get(s) == role),
                "committed": by_role.get(role, 0),
                "reserved": sum(r.reserved for r in rows if r.status == rs.HELD and r.role == role),
            }
        )
    return {
        "max_running_jobs": settings.max_running_jobs or None,
        "running": len(running),
        "queued": sum(queued_by_session.values()),
        "caps": caps,
        "sessions": session_rows,
        "roles": role_rows,
        "tokens_saved_by_dedup": saved,
    }


def empty_status(settings: Settings) -> dict[str, Any]:
    """The view of a workspace with no registry yet (nothing is created to show it)."""
    return {
        "max_running_jobs": settings.max_running_jobs or None,
        "running": 0,
        "queued": 0,
        "caps": [
            _cap("lifetime", settings.token_budget, 0, 0),
            _cap("daily", settings.token_budget_daily, 0, 0, day=rs.utc_day()),
        ],
        "sessions": [],
        "roles": [],
        "tokens_saved_by_dedup": 0,
    }


def render(view: dict[str, Any]) -> str:
    """`mam budget` without --json: one line per cap, session and role."""

    def n(value: Any) -> str:
        return "-" if value is None else str(value)

    cap = n(view["max_running_jobs"])
    lines = [f"running {view['running']} of {cap}, queued {view['queued']}"]
    for c in view["caps"]:
        day = f" ({c['day']})" if c.get("day") else ""
        lines.append(
            f"{c['name']}{day}: limit {n(c['limit'])}, used {c['used']} (committed {c['committed']}, reserved "
            f"{c['reserved']}), remaining {n(c['remaining'])}"
        )
    for s in view["sessions"]:
        lines.append(
            f"session {s['session']} [{s['role'] or '-'}]: limit {n(s['limit'])}, used {s['used']} (committed "
            f"{s['committed']}, reserved {s['reserved']}), remaining {n(s['remaining'])}; running {s['running']}, "
            f"queued {s['queued']}"
        )
    for r in view["roles"]:
        lines.append(
            f"role {r['role']}: running {r['running']} of {n(r['max_running_jobs'])}, queued {r['queued']}; "
            f"committed {r['committed']}, reserved {r['reserved']}"
        )
    lines.append(f"tokens saved by dedup: {view['tokens_saved_by_dedup']}")
    return "\n".join(lines)
