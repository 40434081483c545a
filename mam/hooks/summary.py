"""What `status --json` adds to each session row: its activity (mam.hooks.status) and its jobs' usage, summed."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from mam.outcomes import JobState
from mam.store import jobs as jobs_table
from mam.store import pauses
from mam.store.registry import Registry
from mam.store.sessions import SessionRow
from mam.workspace import Workspace

USAGE_KEYS = ("input_tokens", "output_tokens", "cache_read_tokens", "cache_write_tokens")


def sum_usage(usages: list[dict[str, Any]]) -> dict[str, Any] | None:
    """The token counts added up, with the sources they came from (None when no job recorded any)."""
    if not usages:
        return None
    total: dict[str, Any] = {k: sum(int(u.get(k) or 0) for u in usages) for k in USAGE_KEYS}
    total["jobs"] = len(usages)
    total["source"] = ",".join(sorted({str(u.get("source", "")) for u in usages if u.get("source")}))
    return total


def session_extras(registry: Registry) -> Callable[[Workspace, SessionRow], dict[str, Any]]:
    """Read once what every session's extras need (open jobs, recorded usage); return the per-row function."""
    from mam.hooks.status import session_activity

    with registry.read() as conn:
        open_rows = jobs_table.open_jobs(conn)
        every = jobs_table.list_jobs(conn, limit=1_000_000)
        found = pauses.of(conn, [r.id for r in open_rows if r.state == JobState.PAUSED.value])
    paused: dict[str, dict[str, Any]] = {}  # a session's paused job (mam job pause): {job, mode, since, by}
    for row in open_rows:
        if row.state == JobState.PAUSED.value and row.session not in paused:
            paused[row.session] = {"job": row.id, **pauses.view(found.get(row.id))}
    open_by_session: dict[str, dict[str, Any]] = {}
    queued: dict[str, list[str]] = {}  # jobs a governor cap holds (mam.governor)
    for row in open_rows:
        if row.state == JobState.QUEUED.value:
            queued.setdefault(row.session, []).append(row.id)
        job = row.data.get("job", {})
        if row.session not in open_by_session and row.state in ("delivering", "delivered", "running"):
            open_by_session[row.session] = job
    usage_by_session: dict[str, list[dict[str, Any]]] = {}
    for row in every:
        usage = row.data.get("meta", {}).get("usage")
        if isinstance(usage, dict):
            usage_by_session.setdefault(row.session, []).append(usage)

    def extras(ws: Workspace, row: SessionRow) -> dict[str, Any]:
        return {
            **session_activity(ws, row, open_by_session.get(row.name)),
            "usage": sum_usage(usage_by_session.get(row.name, [])),
            "queued": queued.get(row.name, []),
            "paused": paused.get(row.name),
        }

    return extras
