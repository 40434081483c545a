"""Token budgets: what the caps hold now (the load an admission is decided on), the settlement of a
reservation, the reservations of dead wrappers, and the one warning at 80 % of a cap.

A usage counts as all its tokens: input + output + cache reads + cache writes (or the agent's own
`--tokens` total). A job delivered whose usage cannot be measured (a CLI mam reads no usage of, the
origin of a remote job, a wrapper killed before it measured) commits its reservation: the budget
stays a hard cap. A job whose brief never reached its agent spends nothing (released).
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from mam.governor.admission import Cap, Load, Want
from mam.jobs.ledger import Ledger, owner_alive
from mam.jobs.usage import total
from mam.notify import send
from mam.outcomes import OPEN_STATES
from mam.settings import Settings
from mam.store import reservations as rs
from mam.store import sessions as sessions_table

WARN_AT = 0.8


def want_of(row: rs.Row) -> Want:
    return Want(job_id=row.job_id, qid=row.qid, session=row.session, role=row.role, tokens=row.reserved)


def contends(row: rs.Row, want: Want) -> bool:
    """A queued job ahead of `want` that still waits for its turn (open, its wrapper alive)."""
    return row.job_id != want.job_id and row.qid < want.qid and row.job_state in OPEN_STATES and owner_alive(row.owner)


def spent_by(row: rs.Row, usage: Any, *, claimed: bool) -> tuple[int, str]:
    """(tokens to commit, source) for a job that ended: measured, else its reservation if delivered, else 0."""
    measured = total(usage)
    if measured is not None:
        return measured, "measured"
    if claimed and row.status == rs.HELD:
        return row.reserved, "estimate"
    return 0, ""


def orphaned(row: rs.Row) -> bool:
    """A reservation whose job ended while its wrapper was dead (a living wrapper settles its own)."""
    return row.job_state not in OPEN_STATES and not owner_alive(row.owner)


def settle_orphans(conn: sqlite3.Connection) -> int:
    """Settle the orphaned reservations (see `orphaned`); return how many."""
    n = 0
    for row in rs.unsettled(conn):
        if not orphaned(row):
            continue
        data = json.loads(row.data or "{}")
        job, meta = data.get("job") or {}, data.get("meta") or {}
        spent, source = spent_by(row, meta.get("usage"), claimed=job.get("claimed_ms") is not None)
        n += rs.settle(conn, row.job_id, committed=spent, source=source)
    return n


@dataclass(frozen=True)
class Scope:
    """What the token caps count: committed for good, reserved in flight."""

    committed: int
    committed_today: int
    reserved: int
    reserved_by_session: Mapping[str, int]


def scope(conn: sqlite3.Connection, rows: list[rs.Row], *, exclude: str = "") -> Scope:
    held = [r for r in rows if r.status == rs.HELD and r.job_id != exclude]
    by_session: dict[str, int] = {}
    for r in held:
        by_session[r.session] = by_session.get(r.session, 0) + r.reserved
    return Scope(
        committed=rs.committed_total(conn),
        committed_today=rs.committed_total(conn, day=rs.utc_day()),
        reserved=sum(r.reserved for r in held),
        reserved_by_session=by_session,
    )


def caps(conn: sqlite3.Connection, settings: Settings, sc: Scope, *, sessions: list[str]) -> list[Cap]:
    """The token caps that apply: the workspace's (lifetime, today's) and those of `sessions`."""
    out = []
    if settings.token_budget:
        out.append(Cap("lifetime", settings.token_budget, sc.committed, sc.reserved))
    if settings.token_budget_daily:
        out.append(Cap("daily", settings.token_budget_daily, sc.committed_today, sc.reserved))
    for name in sessions:
        row = sessions_table.find(conn, name)
        if row is not None and row.token_budget:
            spent = rs.committed_total(conn, session=name)
            out.append(Cap("session", row.token_budget, spent, sc.reserved_by_session.get(name, 0), session=name))
    return out


def load(conn: sqlite3.Connection, rows: list[rs.Row], settings: Settings, want: Want) -> Load:
    """The load the admission of `want` is decided on (its own queued row holds nothing)."""
    running = [r for r in rows if r.status == rs.HELD and r.job_state in OPEN_STATES and r.job_id != want.job_id]
    by_role: dict[str, int] = {}
    for r in running:
        by_role[r.role] = by_role.get(r.role, 0) + 1
    roles = {r.role for r in rows if r.role} | ({want.role} - {""})
    sessions = sorted({r.session for r in rows} | {want.session})
    return Load(
        running=len(running),
        running_by_role=by_role,
        max_running=settings.max_running_jobs,
        max_running_by_role={role: settings.max_running_for_role(role) for role in roles},
        caps=caps(conn, settings, scope(conn, rows, exclude=want.job_id), sessions=sessions),
    )


# -- the warning at 80 % ----------------------------------------------------------------------------
def warnings(conn: sqlite3.Connection, settings: Settings, *, session: str) -> list[dict[str, Any]]:
    """The caps that reached WARN_AT of their limit for the first time (each marked once for good)."""
    rows = rs.unsettled(conn)
    out = []
    for cap in caps(conn, settings, scope(conn, rows), sessions=[session]):
        used = cap.committed + cap.reserved
        if used < WARN_AT * cap.limit:
            continue
        key = f"budget80:{cap.name}:" + (cap.session or (rs.utc_day() if cap.name == "daily" else ""))
        if rs.mark_once(conn, key):
            out.append({"key": key, "cap": cap.name, "session": cap.session, "limit": cap.limit, "used": used})
    return out


def tell(ledger: Ledger, settings: Settings, notes: list[dict[str, Any]]) -> None:
    """One audit line and one notification (`budget`) for each cap that reached 80 %."""
    for note in notes:
        message = f"the {note['cap']} token budget is {note['used']} of {note['limit']} tokens (80 % reached)"
        ledger.note("budget_warning", **note, message=message)
        send(
            ledger.ws,
            settings,
            kind="budget",
            subject=note["key"],
            payload={"job": ledger.job.id, "session": note["session"] or ledger.job.session, "message": message},
        )
