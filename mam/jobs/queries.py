"""Reading jobs: status, lists, the audit log, sub-jobs (cancelling one: mam.jobs.stale `cancel`)."""

from __future__ import annotations

import time
from typing import Any

from mam.bus.envelope import Envelope
from mam.errors import DecodeError, JobNotFound
from mam.ids import check_job_id
from mam.jobs import record as rec
from mam.jobs.model import Event, Job
from mam.outcomes import JobState
from mam.store import jobs as jobs_table
from mam.store import pauses
from mam.store.jobs import JobRow
from mam.store.pauses import PauseRow
from mam.store.registry import Registry
from mam.workspace import Workspace


def job_view(row: JobRow, pause: PauseRow | None = None) -> dict[str, Any]:
    """The public record of a job (never the token); `paused` is null unless it is paused."""
    job = row.data.get("job", {})
    meta = row.data.get("meta", {})
    return {
        **job,
        **{k: v for k, v in meta.items() if k != "token"},
        "id": row.id,
        "session": row.session,
        "state": row.state,
        "reason": row.reason,
        "exit_code": row.exit_code,
        "owner": row.owner,
        "kind": row.kind,
        "target": row.target,
        "parent_job": row.parent_job,
        "created_at": row.created_at,
        "updated_at": row.updated_at,
        "ended_at": row.ended_at,
        "idempotency_key": meta.get("idempotency_key"),
        "paused": pauses.view(pause) if row.state == JobState.PAUSED else None,
    }


def status(registry: Registry, job_id: str) -> dict[str, Any]:
    row = registry.job(job_id)
    with registry.read() as conn:
        view = job_view(row, pauses.get(conn, job_id))
        view["children"] = [
            {"id": c.id, "state": c.state, "reason": c.reason, "session": c.session}
            for c in jobs_table.list_jobs(conn, parent=job_id, limit=1000)
        ]
    return view


def waits_for(registry: Registry, job: Job) -> str:
    """What a job waiting for its turn waits for, in words (its live line says it): the job of its session
    ahead of it, or the workspace's hold (who placed it, since when, what releases it); '' for any other."""
    if job.state is JobState.PENDING:
        row = registry.find_job(job.id)
        if row is None:
            return ""
        with registry.read() as conn:
            ahead = jobs_table.open_jobs_ahead(conn, job.session, row.qid)
        if not ahead:
            return ""
        more = f" ({len(ahead) - 1} more ahead)" if len(ahead) > 1 else ""
        return f"waiting for {ahead[0].id} ({ahead[0].state}) on session {job.session}{more}"
    if job.state is JobState.QUEUED and job.queued_for == "hold":
        with registry.read() as conn:
            held = pauses.hold(conn)
        return "" if held is None else held_text(held)
    return ""


def held_text(held: PauseRow) -> str:
    """The workspace's hold in words: who placed it, since when, what releases it."""
    return (
        f"the workspace is held by {held.by or 'someone'} since {clock(held.since_ms)} ({held.mode}): "
        "mam resume --all releases it"
    )


def clock(ms: int) -> str:
    """A moment as a local clock time (its date too, when not today)."""
    when = time.localtime(ms / 1000)
    today = time.localtime()
    same_day = when.tm_year == today.tm_year and when.tm_yday == today.tm_yday
    return time.strftime("%H:%M:%S" if same_day else "%Y-%m-%d %H:%M", when)


def last_event(registry: Registry, job: Job) -> Event | None:
    """The last event `job` applied, as a model input (what a live line shows as `last:`); None if none."""
    if not job.last_seq:
        return None
    for row in registry.events_after(job.id, job.last_seq - 1):
        if row.seq != job.last_seq:
            continue
        try:
            env = Envelope.decode(row.raw)
        except DecodeError:
            return None
        if env.seq != row.seq:
            return None
        return Event(at=int(row.recorded_at * 1000), seq=env.seq, type=env.type, sender=env.sender, body=dict(env.body))
    return None


def existing_registry(ws: Workspace, job_id: str) -> Registry:
    """For read-only job commands: the registry if the workspace has one (creates nothing), else JobNotFound."""
    check_job_id(job_id)
    registry = Registry.open_existing(ws)
    if registry is None:
        raise JobNotFound(f"no job {job_id!r} in workspace {ws.root} (it has no registry)", job_id=job_id)
    return registry


def workspace_jobs(ws: Workspace, **filters: Any) -> list[dict[str, Any]]:
    """`mam job list`: recent jobs of the workspace, newest first; none if it has no registry (creates nothing)."""
    registry = Registry.open_existing(ws)
    if registry is None:
        return []
    try:
        return list_jobs(registry, **filters)
    finally:
        registry.close()


def list_jobs(
    registry: Registry,
    *,
    session: str | None = None,
    state: str | None = None,
    parent: str | None = None,
    open_only: bool = False,
    limit: int = 50,
) -> list[dict[str, Any]]:
    with registry.read() as conn:
        rows = (
            jobs_table.open_jobs(conn, session)
            if open_only
            else jobs_table.list_jobs(conn, session=session, state=state, parent=parent, limit=limit)
        )
        found = pauses.of(conn, [r.id for r in rows if r.state == JobState.PAUSED])
    return [job_view(r, found.get(r.id)) for r in rows]


def log(ws: Workspace, registry: Registry, job_id: str) -> list[dict[str, Any]]:
    registry.job(job_id)  # JobNotFound for an unknown id
    return rec.read_audit(ws, job_id)
