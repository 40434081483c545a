"""The scheduler: decides each routine's ticks and fires them as ordinary delegations.

It runs in the node (mam.node.server starts `run` in a thread), one `step` at a time, with the clock
handed in (tests drive it). A step, in one registry write:

1. records the routines' due ticks (mam.routines.decide.plan_schedule) and moves each routine's
   `next_at` on: a tick is decided once, whatever restarts (its receipt's key is unique);
2. decides every pending tick (paused, hold, concurrency, then the token budgets: a budget that
   refuses the job is a skip with reason `budget`); one that fires becomes `firing` with its job id
   fixed (`rt-<n>-<routine>`) before anything is delegated.

Then each tick that fires is delegated in a thread of its own, by the node's attempt (`fire`: the same
as `mam job delegate`'s, mam.node.service), with the tick's idempotency key `routine:NAME:TIME` and its
fixed job id, and its receipt gets the job's outcome. A tick left `firing` by a node that died is
delegated again by the next node with the same job id and key: it takes the job over (a brief
already typed is never typed again) or reports its end, so a tick never fires twice.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from typing import Any

from mam.errors import MamError
from mam.governor import budget
from mam.governor.admission import Want, decide
from mam.governor.gate import estimate_for
from mam.jobs.delegate import DelegateRequest, delegate_request
from mam.jobs.result import Outcome
from mam.jobs.target import parse_target
from mam.outcomes import OPEN_STATES
from mam.routines import decide as rules
from mam.routines.hold import workspace_hold
from mam.routines.schedule import due, iso, period_at, schedule_of
from mam.settings import Settings
from mam.store import jobs as jobs_table
from mam.store import reservations as rs
from mam.store import routines as table
from mam.store import sessions as sessions_table
from mam.store.registry import Registry
from mam.util import pokes
from mam.workspace import Workspace

log = logging.getLogger(__name__)
IDLE_WAIT_S = 1.0  # a step at least this often: ticks asked for by other processes (run, webhook)
# With no routine at all, this often: `mam routine add` through a node wakes it at once; one added where no node
# serves (MAM_NODE=0) beside a running node is seen this late. Every wake-up of an idle node costs CPU (on this
# project's machine kind ~0.4 ms each, its caches cold), so an idle node wakes as seldom as it can.
EMPTY_WAIT_S = 10.0


def tick_key(name: str, at: float) -> str:
    """A scheduled tick's idempotency key."""
    return f"routine:{name}:{iso(at)}"


def job_id_of(n: int, name: str) -> str:
    return f"rt-{n}-{name}"


class Scheduler:
    """One workspace's routines, stepped by `run` (in the node) or by a test with its own clock."""

    def __init__(
        self,
        ws: Workspace,
        settings: Settings,
        registry: Registry,
        *,
        clock: Callable[[], float] = time.time,
        fire: Callable[[DelegateRequest], Outcome],
    ) -> None:
        self.ws, self.settings, self.registry, self.clock = ws, settings, registry, clock
        self.fire = fire  # drives one tick's delegation to its end (the node's attempt: mam.node.service)
        self.wake = threading.Event()
        self.threads: dict[int, threading.Thread] = {}  # tick number -> its delegation in this process
        self._lock = threading.Lock()
        self.empty = False  # the last step found no routine and no tick

    # -- the loop -------------------------------------------------------------------------------
    def pause(self, following: float | None) -> None:
        """Wait for the next tick (`following`), a wake-up, or at most IDLE_WAIT_S (EMPTY_WAIT_S with no routine)."""
        most = EMPTY_WAIT_S if self.empty else IDLE_WAIT_S
        wait = most if following is None else min(max(following - self.clock(), 0.0), most)
        if self.wake.wait(wait):
            self.wake.clear()

    def step(self) -> float | None:
        """Decide what is due now and start what fires; the time of the next scheduled tick (None: none)."""
        now = self.clock()
        with self.registry.read() as conn:  # most steps find nothing to do: they take no write lock
            routines = table.list_all(conn)
            waiting = table.unfinished(conn)
        self.empty = not routines and not waiting
        if not self._anything_due(routines, waiting, now):
            return _next_tick(routines)
        with self.registry.write() as conn:
            hold = workspace_hold(conn)
            by_name = {r.name: r for r in table.list_all(conn)}
            for r in by_name.values():
                self._schedule(conn, r, now)
            start = self._pending(conn, by_name, hold, now)
            routines = table.list_all(conn)
        pokes.poke(self.ws, [pokes.ROUTINES])  # `mam routine run` waits for its tick's decision
        for n, r in start:
            self._start(n, r)
        return _next_tick(routines)

    def _anything_due(self, routines: list[table.RoutineRow], waiting: list[table.TickRow], now: float) -> bool:
        """A scheduled tick is due, a tick waits for a decision, or one is firing with no thread of ours."""
        if any(r.kind != "webhook" and r.next_at is not None and r.next_at <= now for r in routines):
            return True
        return any(t.status == table.PENDING or not self._driven(t.n) for t in waiting)

    # -- deciding -------------------------------------------------------------------------------
    def _schedule(self, conn: Any, r: table.RoutineRow, now: float) -> None:
        if r.kind == "webhook" or r.next_at is None or r.next_at > now:
            return
        schedule = schedule_of(r.kind, r.spec, r.tz, r.anchor)
        d = due(schedule, r.next_at, now, limit=rules.CATCH_UP_MAX)
        period = period_at(schedule, d.ticks[-1]) if d.ticks else 60.0
        for t in rules.plan_schedule(d, now, period_s=period, catch_up=r.catch_up, paused=r.paused):
            table.add_tick(
                conn,
                routine=r.name,
                key=tick_key(r.name, t.at),
                trigger="schedule",
                scheduled=t.at,
                now=now,
                status=table.PENDING if t.fire else table.SKIPPED,
                reason=t.reason,
                detail=t.detail,
            )
        table.update(conn, r.name, now=now, next_at=d.following)

    def _pending(
        self, conn: Any, routines: dict[str, table.RoutineRow], hold: str, now: float
    ) -> list[tuple[int, table.RoutineRow]]:
        """Decide each pending tick; the ticks to delegate now (firing ones no thread of ours drives)."""
        start: list[tuple[int, table.RoutineRow]] = []
        ticks = table.unfinished(conn)
        # The latest pending tick of each routine, catch-up ones aside (they are never coalesced).
        latest_pending = {t.routine: t.n for t in ticks if t.status == table.PENDING and t.reason != rules.MISSED}
        for t in ticks:
            r = routines.get(t.routine)
            if r is None:
                continue
            if t.status == table.FIRING:
                if not self._driven(t.n):
                    start.append((t.n, r))  # a node that died left it: the same job id and key again
                continue
            v = rules.verdict(
                paused=r.paused,
                hold=hold,
                concurrency=r.concurrency,
                open_job=_open_job(conn, r.name),
                newer_pending=latest_pending.get(r.name, t.n) != t.n,
                catching_up=t.reason == rules.MISSED,
            )
            if v.action == rules.FIRE:
                refusal = self._refused_by_budget(conn, r)
                if refusal:
                    v = rules.Verdict(rules.SKIP, rules.BUDGET, refusal)
            if v.action == rules.SKIP:
                table.set_tick(conn, t.n, status=table.SKIPPED, reason=v.reason, detail=v.detail, ended_at=now)
            elif v.action == rules.WAIT:
                if (t.reason, t.detail) != (v.reason, v.detail):
                    table.set_tick(conn, t.n, reason=v.reason, detail=v.detail)
            else:
                table.set_tick(conn, t.n, status=table.FIRING, job_id=job_id_of(t.n, r.name), fired_at=now)
                start.append((t.n, r))
        return start

    def _refused_by_budget(self, conn: Any, r: table.RoutineRow) -> str:
        """Why the token budgets would refuse this routine's job now ('' if they would not)."""
        target = parse_target(r.target)
        session = f"{target.runner}/{target.session}" if target.remote else target.session
        row = sessions_table.find(conn, target.session)
        role = row.role if row is not None else ""
        tokens = estimate_for(conn, role, self.settings)
        if r.max_tokens:
            tokens = min(tokens, r.max_tokens)
        rows = rs.unsettled(conn)
        want = Want(job_id="", qid=1 << 62, session=session, role=role, tokens=tokens)
        out = decide(want, [], budget.load(conn, rows, self.settings, want))
        return out.detail if out.refused else ""

    def _driven(self, n: int) -> bool:
        with self._lock:
            thread = self.threads.get(n)
            return thread is not None and thread.is_alive()

    # -- firing ---------------------------------------------------------------------------------
    def _start(self, n: int, r: table.RoutineRow) -> None:
        thread = threading.Thread(target=self._fire, args=(n, r), name=f"mam-routine-{r.name}", daemon=True)
        with self._lock:
            self.threads[n] = thread
        thread.start()

    def _fire(self, n: int, r: table.RoutineRow) -> None:
        with self.registry.read() as conn:
            t = table.tick(conn, n)
        if t is None:
            return  # the routine was removed
        brief = r.brief + (f"\n\n{t.text}" if t.text else "")
        outcome: dict[str, Any]
        try:
            req = delegate_request(
                target=r.target,
                brief=brief,
                job_id=t.job_id,
                idempotency_key=t.key,
                timeout_s=r.timeout_s,
                max_tokens=r.max_tokens,
            )
            out = self.fire(req)
            outcome = {"outcome": out.state, "exit_code": out.exit_code, "detail": out.reason or out.detail}
            if out.job_id != t.job_id:
                outcome["job_id"] = out.job_id
        except MamError as e:
            outcome = {"outcome": "error", "exit_code": e.exit_code, "detail": str(e)}
        except Exception as e:
            log.exception("routine %s: tick %s failed", r.name, t.key)
            outcome = {"outcome": "error", "exit_code": 1, "detail": f"{type(e).__name__}: {e}"}
        with self.registry.write() as conn:
            table.set_tick(conn, n, status=table.DONE, ended_at=self.clock(), **outcome)
        log.info("routine %s: tick %s ended %s", r.name, t.key, outcome["outcome"])
        self.wake.set()  # a coalesced tick may fire now

    def join(self, timeout: float) -> None:
        """Wait for the delegations this process started (tests)."""
        deadline = time.monotonic() + timeout
        for thread in list(self.threads.values()):
            thread.join(max(0.0, deadline - time.monotonic()))


def _next_tick(routines: list[table.RoutineRow]) -> float | None:
    following = [r.next_at for r in routines if r.next_at is not None and not r.paused]
    return min(following) if following else None


def _open_job(conn: Any, routine: str) -> str:
    """The routine's job still open (or still being delegated), else ''."""
    last = table.last_fired(conn, routine)
    if last is None or last.status not in (table.FIRING, table.DONE):
        return ""
    row = jobs_table.find(conn, last.job_id)
    if row is None:
        return last.job_id if last.status == table.FIRING else ""
    return row.id if row.state in OPEN_STATES else ""
