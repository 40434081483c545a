"""What `mam routine add|list|log|pause|resume|remove|run` and the MCP tools `routine_*` do.

The registry holds the routines and their receipts; the node fires them (mam.routines.fire). These
functions only write what a tick needs: `run` records a pending tick for the node to decide.
"""

from __future__ import annotations

import secrets
import sqlite3
import time
from dataclasses import dataclass
from typing import Any

from mam.errors import RoutineExists, RoutineNotFound, UsageError
from mam.ids import check_name
from mam.jobs.brief import check_brief
from mam.jobs.request import check_values
from mam.jobs.target import parse_target
from mam.routines.decide import check_catch_up, check_concurrency
from mam.routines.health import webhook_problem
from mam.routines.schedule import Cron, describe, iso, parse_duration, schedule_of
from mam.routines.webhook import new_secret, port_of, url
from mam.store import jobs as jobs_table
from mam.store import routines as table
from mam.store.registry import Registry
from mam.util import pokes

LOG_LIMIT = 20
JOB_LOOK_S = 0.05  # a fired tick's job row is looked for this often (wait_decided)


@dataclass(frozen=True)
class Spec:
    """`mam routine add`'s options, checked by `add`."""

    name: str
    target: str
    brief: str
    every: str | None = None
    cron: str | None = None
    tz: str = "UTC"
    concurrency: str = "skip"
    catch_up: str = "skip"
    max_tokens: int | None = None
    timeout_s: float | None = None
    on_webhook: bool = False


def check_routine_name(name: str) -> str:
    return check_name(name, "routine name")


def checked(spec: Spec, *, now: float | None = None) -> table.RoutineRow:
    """The routine `spec` describes, every option checked (UsageError, exit 2); nothing is read or written."""
    now = time.time() if now is None else now
    check_routine_name(spec.name)
    parse_target(spec.target)
    check_brief(spec.brief)
    check_values({"max_tokens": spec.max_tokens, "timeout_s": spec.timeout_s})
    if spec.every is not None and spec.cron is not None:
        raise UsageError("give at most one of --every and --cron")
    if spec.every is None and spec.cron is None and not spec.on_webhook:
        raise UsageError("give --every DURATION, --cron EXPR or --on-webhook")
    if spec.tz != "UTC" and spec.cron is None:
        raise UsageError("--tz goes with --cron")
    if spec.every is not None:
        kind, text = "every", str(parse_duration(spec.every))
    elif spec.cron is not None:
        kind, text = "cron", Cron.parse(spec.cron, spec.tz).text
    else:
        kind, text = "webhook", ""
    return table.RoutineRow(
        name=spec.name,
        target=spec.target,
        brief=spec.brief,
        kind=kind,
        spec=text,
        tz=spec.tz,
        anchor=now,
        concurrency=check_concurrency(spec.concurrency),
        catch_up=check_catch_up(spec.catch_up),
        max_tokens=spec.max_tokens,
        timeout_s=spec.timeout_s,
        paused=False,
        next_at=_first(kind, text, spec.tz, now),
        secret=new_secret() if spec.on_webhook else "",
        created_at=now,
        updated_at=now,
    )


def add(registry: Registry, spec: Spec, *, now: float | None = None) -> dict[str, Any]:
    """Add a routine (checked first: nothing is written for a bad option); its listing, with `secret`
    (shown this once) when it has a webhook."""
    return add_row(registry, checked(spec, now=now))


def add_row(registry: Registry, row: table.RoutineRow) -> dict[str, Any]:
    """Add a routine `checked` made (RoutineExists if its name is taken); as `add`."""
    with registry.write() as conn:
        try:
            table.insert(conn, row)
        except sqlite3.IntegrityError as e:
            raise RoutineExists(f"a routine named {row.name!r} exists (remove it first)", routine=row.name) from e
    if row.secret:
        port_of(registry)  # its URL, chosen now and kept
    out = listing(registry, row)
    if row.secret:
        out["secret"] = row.secret
    return out


def _first(kind: str, spec: str, tz: str, now: float) -> float | None:
    if kind == "webhook":
        return None
    return schedule_of(kind, spec, tz, now).after(now)


def _get(conn: sqlite3.Connection, name: str) -> table.RoutineRow:
    check_routine_name(name)
    row = table.find(conn, name)
    if row is None:
        raise RoutineNotFound(f"no routine named {name!r} (see `mam routine list`)", routine=name)
    return row


def _when(t: float | None) -> str | None:
    return None if t is None else iso(t)


def listing(registry: Registry, row: table.RoutineRow) -> dict[str, Any]:
    """A routine as `mam routine list --json` shows it (never its secret)."""
    data = row.as_dict()
    data["schedule"] = describe(row.kind, row.spec, row.tz)
    data["next_tick"] = None if row.paused else _when(row.next_at)
    data["state"] = "paused" if row.paused else "enabled"
    if row.secret:
        with registry.read() as conn:
            port = table.meta(conn, "routine_webhook_port")
        data["url"] = url(int(port), row.name) if port and port.isdigit() else None
        data["webhook_down"] = webhook_problem(registry) or None
    with registry.read() as conn:
        last = table.ticks(conn, row.name, limit=1)
    data["last"] = receipt(last[0]) if last else None
    return data


def list_routines(registry: Registry | None) -> list[dict[str, Any]]:
    if registry is None:
        return []
    with registry.read() as conn:
        rows = table.list_all(conn)
    return [listing(registry, r) for r in rows]


def receipt(t: table.TickRow) -> dict[str, Any]:
    return {
        "n": t.n,
        "routine": t.routine,
        "trigger": t.trigger,
        "scheduled": iso(t.scheduled),
        "fired": _when(t.fired_at),
        "status": t.status,
        "reason": t.reason,
        "detail": t.detail,
        "job": t.job_id or None,
        "outcome": t.outcome or None,
        "exit_code": t.exit_code,
        "key": t.key,
    }


def log(registry: Registry | None, name: str, *, limit: int = LOG_LIMIT) -> list[dict[str, Any]]:
    """The routine's last `limit` receipts, newest first."""
    check_routine_name(name)
    if limit < 1:
        raise UsageError("--limit must be 1 or more")
    if registry is None:
        raise RoutineNotFound(f"no routine named {name!r} (see `mam routine list`)", routine=name)
    with registry.read() as conn:
        _get(conn, name)
        return [receipt(t) for t in table.ticks(conn, name, limit=limit)]


def set_paused(registry: Registry, name: str, paused: bool, *, now: float | None = None) -> dict[str, Any]:
    """Pause or resume; a resumed routine's next tick is the first one after now (none is caught up)."""
    now = time.time() if now is None else now
    with registry.write() as conn:
        row = _get(conn, name)
        changes: dict[str, Any] = {"paused": int(paused)}
        if not paused and row.paused:
            changes["next_at"] = _first(row.kind, row.spec, row.tz, now)
        table.update(conn, name, now=now, **changes)
        row = _get(conn, name)
    return listing(registry, row)


def remove(registry: Registry, name: str) -> None:
    """Remove the routine and its receipts (a job it fired runs on to its end)."""
    with registry.write() as conn:
        _get(conn, name)
        table.delete(conn, name)


def record_tick(
    conn: sqlite3.Connection, name: str, trigger: str, *, key: str, now: float, text: str = ""
) -> int | None:
    """A pending tick asked for now (`run`, a webhook delivery); None if its key was recorded already."""
    return table.add_tick(conn, routine=name, key=key, trigger=trigger, scheduled=now, now=now, text=text)


def request_run(registry: Registry, name: str, *, now: float | None = None) -> int:
    """Record one tick of `name` to fire now (the node decides and fires it); its number."""
    now = time.time() if now is None else now
    with registry.write() as conn:
        _get(conn, name)
        n = record_tick(conn, name, "run", key=f"routine:{name}:run:{iso(now)}:{secrets.token_hex(4)}", now=now)
    assert n is not None  # the key is new
    return n


def wait_decided(registry: Registry, n: int, *, timeout_s: float) -> dict[str, Any] | None:
    """The tick's receipt once the node has decided it (fired, skipped, or waiting with a reason), or as it
    is after `timeout_s`. Woken by the routine thread's poke after each decision (`routines`). A fired tick
    counts as decided once its job is on record (or the tick has ended), so the job id in the receipt can
    be followed at once (`mam job wait ID`); the attempt's thread writes that row and pokes nothing here,
    so a fired tick is looked at again every JOB_LOOK_S until then."""
    deadline = time.monotonic() + timeout_s
    with pokes.Waiter(registry.ws, [pokes.ROUTINES]) as waiter:  # listening before the first look
        while True:
            with registry.read() as conn:
                t = table.tick(conn, n)
                unrecorded = t is not None and t.status == table.FIRING and jobs_table.find(conn, t.job_id) is None
            if t is None:
                return None
            left = deadline - time.monotonic()
            if (t.status != table.PENDING and not unrecorded) or t.reason or left <= 0:
                return receipt(t)
            waiter.wait(min(left, JOB_LOOK_S) if unrecorded else left)


def withdraw(registry: Registry, n: int) -> bool:
    """Delete tick `n` if no node has decided it yet; whether it was deleted."""
    with registry.write() as conn:
        return table.withdraw_tick(conn, n)
