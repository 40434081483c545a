"""What `mam role ...` and `mam task ...` (and the MCP tools `task_*`) do to the registry, and how they show it.

Every input is checked before anything is written (a bad one is a UsageError, exit 2). The node wakes tasks
(mam.org.scheduler); these functions only record what a wake needs: a task added, marked done, reopened or
cancelled, a breaker reset. Looking (`list`, `show`) reads the registry and starts nothing; what holds a
`todo` task (`queued_for`) is worked out by the same rules the node follows (mam.org.rules).
"""

from __future__ import annotations

import sqlite3
import time
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from mam.errors import OrgRefused, RoleExists, RoleNotFound, TaskNotFound, UsageError
from mam.ids import check_id, check_name
from mam.jobs.attach import check_key
from mam.jobs.brief import check_brief
from mam.jobs.delegate import check_known_session
from mam.org import rules
from mam.settings import Settings
from mam.store import jobs as jobs_table
from mam.store import org as table
from mam.store import pauses
from mam.store.org import (
    BLOCKED,
    CANCELLED,
    DONE,
    REOPENED,
    RUNNING,
    TODO,
    RoleRow,
    TaskRow,
)
from mam.store.registry import Registry

DEFAULT_BREAKER = 3  # consecutive failed jobs that trip a role's breaker
TITLE_MAX = 200
NOTE_MAX = 4000


def check_role_name(name: object) -> str:
    return check_name(name, "role name")


def check_task_id(value: object) -> str:
    return check_id(value, "task id")


def today(now: float) -> str:
    """The local day `now` falls on (the daily caps count per local day)."""
    return time.strftime("%Y-%m-%d", time.localtime(now))


# -- roles --------------------------------------------------------------------------------------------
def add_role(
    registry: Registry,
    name: str,
    *,
    session: str,
    reports_to: str | None = None,
    daily_runs: int | None = None,
    breaker: int | None = None,
    now: float | None = None,
) -> dict[str, Any]:
    """Add a role played by `session` (a session of this workspace); its view."""
    now = time.time() if now is None else now
    check_role(name, session=session, reports_to=reports_to, daily_runs=daily_runs, breaker=breaker)
    row = RoleRow(
        name=name,
        session=session,
        reports_to=reports_to or "",
        daily_runs=daily_runs,
        breaker=DEFAULT_BREAKER if breaker is None else breaker,
        failures=0,
        tripped_at=None,
        created_at=now,
        updated_at=now,
    )
    check_known_session(registry, session)  # SessionNotFound (exit 5) naming the sessions there are
    with registry.write() as conn:
        if reports_to and table.role(conn, reports_to) is None:
            raise RoleNotFound(f"--reports-to {reports_to!r}: no such role (see `mam role list`)", role=reports_to)
        try:
            table.insert_role(conn, row)
        except sqlite3.IntegrityError as e:
            raise RoleExists(f"a role named {name!r} exists (remove it first)", role=name) from e
        return role_view(conn, row, now)


def check_role(
    name: str, *, session: str, reports_to: str | None = None, daily_runs: int | None = None, breaker: int | None = None
) -> None:
    """`mam role add`'s options, checked (UsageError, exit 2); nothing is read or written."""
    check_role_name(name)
    check_name(session, "session name")
    if reports_to:
        check_role_name(reports_to)
        if reports_to == name:
            raise UsageError(f"role {name} cannot report to itself")
    if daily_runs is not None and daily_runs < 1:
        raise UsageError("--daily-runs must be a whole number, 1 or more")
    if breaker is not None and breaker < 1:
        raise UsageError("--breaker must be a whole number of failed jobs, 1 or more")


def _role(conn: sqlite3.Connection, name: str) -> RoleRow:
    check_role_name(name)
    row = table.role(conn, name)
    if row is None:
        raise RoleNotFound(f"no role named {name!r} (see `mam role list`)", role=name)
    return row


def role_view(conn: sqlite3.Connection, row: RoleRow, now: float) -> dict[str, Any]:
    """A role as `mam role show --json` prints it."""
    roles = {r.name: r for r in table.roles(conn)}
    counts = {s: 0 for s in table.TASK_STATES}
    counts.update(table.task_counts(conn, row.name))
    return {
        "name": row.name,
        "session": row.session,
        "reports_to": row.reports_to or None,
        "chain": rules.chain(roles, row.name),
        "reports": table.reporting_to(conn, row.name),
        "daily_runs": row.daily_runs,
        "runs_today": table.runs_on(conn, today(now))[row.name],
        "breaker": {"threshold": row.breaker, "failures": row.failures, "tripped": row.tripped},
        "tripped_at": row.tripped_at,
        "tasks": counts,
        "created_at": row.created_at,
    }


def list_roles(registry: Registry | None, *, now: float | None = None) -> list[dict[str, Any]]:
    if registry is None:
        return []
    now = time.time() if now is None else now
    with registry.read() as conn:
        return [role_view(conn, r, now) for r in table.roles(conn)]


def show_role(registry: Registry | None, name: str, *, now: float | None = None) -> dict[str, Any]:
    check_role_name(name)
    if registry is None:
        raise RoleNotFound(f"no role named {name!r} (see `mam role list`)", role=name)
    with registry.read() as conn:
        return role_view(conn, _role(conn, name), time.time() if now is None else now)


def reset_role(registry: Registry, name: str, *, now: float | None = None) -> dict[str, Any]:
    """Close the role's breaker (its failures counted from 0 again): its tasks run again."""
    now = time.time() if now is None else now
    with registry.write() as conn:
        _role(conn, name)
        table.update_role(conn, name, now=now, failures=0, tripped_at=None)
        return role_view(conn, _role(conn, name), now)


def remove_role(registry: Registry, name: str) -> None:
    """Remove a role with no task left to do and no role reporting to it."""
    with registry.write() as conn:
        _role(conn, name)
        left = table.any_open_task_of(conn, name)
        if left is not None:
            raise OrgRefused(
                f"role {name} still has task {left.id} ({left.state}): cancel or finish its tasks first", role=name
            )
        below = table.reporting_to(conn, name)
        if below:
            raise OrgRefused(f"role(s) {', '.join(below)} report to {name}: remove them first", role=name)
        table.delete_role(conn, name)


# -- tasks --------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class TaskSpec:
    """`mam task add`'s options, checked by `checked`."""

    title: str
    role: str
    brief: str | None = None
    blocked_by: tuple[str, ...] = ()
    parent: str | None = None
    idempotency_key: str | None = None


def checked(spec: TaskSpec) -> TaskSpec:
    """`spec` with every option checked (UsageError, exit 2); nothing is read or written."""
    title = check_brief(spec.title, max_bytes=TITLE_MAX, what="the title").strip()
    if "\n" in title or "\r" in title:
        raise UsageError("the title is one line (put the rest in --brief)")
    check_role_name(spec.role)
    brief = check_brief(spec.brief) if spec.brief is not None else None
    blocked_by = tuple(dict.fromkeys(check_task_id(b.strip()) for b in spec.blocked_by))
    parent = check_task_id(spec.parent) if spec.parent else None
    key = check_key(spec.idempotency_key) if spec.idempotency_key is not None else None
    return TaskSpec(title, spec.role, brief, blocked_by, parent, key)


def split_ids(text: str | None) -> tuple[str, ...]:
    """`--blocked-by ID[,ID...]` as ids ('' parts dropped)."""
    return tuple(p.strip() for p in (text or "").split(",") if p.strip())


def add_task(registry: Registry, spec: TaskSpec, settings: Settings, *, now: float | None = None) -> dict[str, Any]:
    """Add a `todo` task (checked first: nothing is written for a bad option); its view. With an idempotency
    key a task has already, that task (the same title, role, brief, blockers and parent only: else exit 2)."""
    now = time.time() if now is None else now
    spec = checked(spec)
    with registry.write() as conn:
        if spec.idempotency_key is not None:
            found = table.task_by_key(conn, spec.idempotency_key)
            if found is not None:
                _same(conn, found, spec)
                return task_view(conn, found, settings, now)
        _role(conn, spec.role)
        named = set(spec.blocked_by) | ({spec.parent} if spec.parent else set())
        states = table.states_of(conn, named)
        for t in sorted(named - set(states)):
            raise TaskNotFound(f"no task {t!r} (see `mam task list`)", task=t)
        row = table.insert_task(
            conn,
            title=spec.title,
            role=spec.role,
            brief=spec.brief or "",
            parent=spec.parent or "",
            blocked_by=list(spec.blocked_by),
            idempotency_key=spec.idempotency_key,
            now=now,
        )
        return task_view(conn, row, settings, now)


def _same(conn: sqlite3.Connection, found: TaskRow, spec: TaskSpec) -> None:
    mine = (spec.title, spec.role, spec.brief or "", spec.parent or "", sorted(spec.blocked_by))
    blocked_by = sorted(table.blockers(conn, [found.id]).get(found.id, []))
    theirs = (found.title, found.role, found.brief, found.parent, blocked_by)
    if mine != theirs:
        raise UsageError(
            f"--idempotency-key {spec.idempotency_key}: it names task {found.id}, added with another title, role, "
            "brief, parent or blockers"
        )


def _task(conn: sqlite3.Connection, task_id: str) -> TaskRow:
    check_task_id(task_id)
    row = table.task(conn, task_id)
    if row is None:
        raise TaskNotFound(f"no task {task_id!r} (see `mam task list`)", task=task_id)
    return row


def mark_done(registry: Registry, task_id: str, *, now: float | None = None) -> TaskRow:
    """A person says the task is done (from review, or any state but running and cancelled): the tasks it
    blocks may run. Done already: nothing changes."""
    now = time.time() if now is None else now
    with registry.write() as conn:
        row = _task(conn, task_id)
        if row.state == RUNNING:
            raise OrgRefused(
                f"task {task_id} is running (job {_last_job(conn, task_id)}): let it end, or cancel it", task=task_id
            )
        if row.state == CANCELLED:
            raise OrgRefused(f"task {task_id} is cancelled: reopen it first", task=task_id)
        if row.state != DONE:
            table.update_task(conn, task_id, now=now, state=DONE, ended_at=now)
        return _task(conn, task_id)


def reopen(registry: Registry, task_id: str, *, note: str | None = None, now: float | None = None) -> TaskRow:
    """Back to `todo` (woken `reopened`, with `note` for its next run): a task in review, blocked, done, failed
    or cancelled."""
    now = time.time() if now is None else now
    if note is not None:
        note = check_brief(note, max_bytes=NOTE_MAX, what="the note")
    with registry.write() as conn:
        row = _task(conn, task_id)
        if row.state in (TODO, RUNNING):
            raise OrgRefused(f"task {task_id} is {row.state}: only an ended, blocked or in-review task is reopened")
        table.update_task(conn, task_id, now=now, state=TODO, wake=REOPENED, note=note or "", ended_at=None)
        return _task(conn, task_id)


def cancel(registry: Registry, task_id: str, *, now: float | None = None) -> tuple[TaskRow, str]:
    """Cancel the task; with the job it runs ('' : none) for the caller to cancel (`mam job cancel`'s way).
    Cancelled already: nothing changes."""
    now = time.time() if now is None else now
    with registry.write() as conn:
        row = _task(conn, task_id)
        if row.state == DONE:
            raise OrgRefused(f"task {task_id} is done: reopen it first", task=task_id)
        job = _last_job(conn, task_id) if row.state == RUNNING else ""
        if row.state != CANCELLED:
            table.update_task(conn, task_id, now=now, state=CANCELLED, ended_at=now)
        return _task(conn, task_id), job


def _last_job(conn: sqlite3.Connection, task_id: str) -> str:
    runs = table.runs_of(conn, task_id)
    return runs[-1].job_id if runs else ""


def task_exists(registry: Registry, task_id: str) -> bool:
    with registry.read() as conn:
        return table.task(conn, task_id) is not None


def task_of_job(registry: Registry, job_id: str) -> str:
    """The task whose run `job_id` is ('' : none)."""
    with registry.read() as conn:
        return table.task_of_job(conn, job_id)


# -- looking ------------------------------------------------------------------------------------------
def world_of(conn: sqlite3.Connection, settings: Settings, now: float) -> rules.World:
    """What the rules look at, as the registry has it now."""
    blockers = table.blockers(conn)
    named = {b for bs in blockers.values() for b in bs}
    return rules.World(
        roles={r.name: r for r in table.roles(conn)},
        states=table.states_of(conn, named),
        blockers=blockers,
        runs_today=table.runs_on(conn, today(now)),
        workspace_cap=settings.org_daily_runs,
        held=pauses.hold(conn) is not None,
        # A session is busy with an open job, or with a task's run whose job is not registered yet (or whose end the
        # node has yet to record): a role's next task never goes to a session its last one still holds.
        busy={r.session for r in jobs_table.open_jobs(conn)} | {r.session for r in table.firing(conn)},
    )


def held(conn: sqlite3.Connection, settings: Settings, now: float) -> dict[str, str]:
    """What holds each `todo` task now ('' : it runs at the node's next step)."""
    return {t.id: why for t, why in rules.plan(table.tasks(conn, states=(TODO,)), world_of(conn, settings, now))}


def task_view(
    conn: sqlite3.Connection,
    row: TaskRow,
    settings: Settings,
    now: float,
    *,
    holds: dict[str, str] | None = None,
    children: list[str] | None = None,
) -> dict[str, Any]:
    """A task as `mam task show --json` prints it."""
    runs = table.runs_of(conn, row.id)
    if holds is None:
        holds = held(conn, settings, now) if row.state == TODO else {}
    if children is None:
        children = table.children(conn, row.id)
    role = table.role(conn, row.role)
    return {
        "id": row.id,
        "title": row.title,
        "role": row.role,
        "session": role.session if role is not None else None,
        "state": row.state,
        "blocked_by": table.blockers(conn, [row.id]).get(row.id, []),
        "parent": row.parent or None,
        "children": children,
        "job": runs[-1].job_id if runs else None,
        "jobs": [r.job_id for r in runs],
        "queued_for": holds.get(row.id, "") if row.state == TODO else "",
        "wait": row.wait or None if row.state == BLOCKED else None,
        "wakes": [r.as_dict() for r in runs],
        "brief": row.brief,
        "note": row.note,
        "idempotency_key": row.idempotency_key,
        "created_at": row.created_at,
        "updated_at": row.updated_at,
        "ended_at": row.ended_at,
    }


def show_task(
    registry: Registry | None, task_id: str, settings: Settings, *, now: float | None = None
) -> dict[str, Any]:
    check_task_id(task_id)
    if registry is None:
        raise TaskNotFound(f"no task {task_id!r} (see `mam task list`)", task=task_id)
    with registry.read() as conn:
        return task_view(conn, _task(conn, task_id), settings, time.time() if now is None else now)


def list_tasks(registry: Registry | None, settings: Settings, *, now: float | None = None) -> list[dict[str, Any]]:
    """Every task, as a tree by parent: each parent before its subtasks (in creation order), with its `depth`."""
    if registry is None:
        return []
    now = time.time() if now is None else now
    with registry.read() as conn:
        rows = table.tasks(conn)
        holds = held(conn, settings, now)
        kids: dict[str, list[TaskRow]] = {}
        ids = {r.id for r in rows}
        for r in rows:
            kids.setdefault(r.parent if r.parent in ids else "", []).append(r)
        out: list[dict[str, Any]] = []
        for row, depth in _walk(kids, ""):
            view = task_view(conn, row, settings, now, holds=holds, children=[k.id for k in kids.get(row.id, [])])
            view["depth"] = depth
            out.append(view)
        return out


def _walk(kids: dict[str, list[TaskRow]], parent: str, depth: int = 0) -> Iterable[tuple[TaskRow, int]]:
    for row in kids.get(parent, []):
        yield row, depth
        yield from _walk(kids, row.id, depth + 1)
