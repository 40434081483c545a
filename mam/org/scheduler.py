"""The org's scheduler: wakes each `todo` task as a job on its role's session once nothing holds it, and
moves the task on when that job ends.

It runs in the node (mam.org.node, a thread of `mam node` beside the routines), one `step` at a time, with
the clock handed in (tests drive it). A step, in one registry write:

1. a `blocked` task whose wait is done goes back to `todo` (to be woken `unblocked`);
2. each `todo` task, in creation order, is decided by mam.org.rules (its blockers, the hold, its role's
   breaker and daily caps, its session): one that runs gets a run row with its job id fixed (`<task>-r<k>`)
   and its brief, and becomes `running`, before anything is delegated.

Then each new run is delegated in a thread of its own by the node's attempt (`fire`, the same as `mam job
delegate`'s: mam.node.service) with that job id and the idempotency key `task:<job id>`. When the job ends,
one write records it and moves the task: `completed` makes it `done`, `blocked` (waiting on another task) or
`in_review` as the agent's disposition says, and closes the role's count of failures; any other end makes it
`failed` and counts for the role's breaker, which trips at its threshold (`breaker_tripped`). A run left
`firing` by a node that died is delegated again by the next node with the same job id: the job is taken over
(a brief already typed is never typed again) or, ended already, reported. So a task never has two jobs for
one wake, and never two open jobs, whatever restarts.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from mam import notify
from mam.errors import MamError
from mam.jobs.brief import TASK_KIND
from mam.jobs.delegate import DelegateRequest, delegate_request
from mam.jobs.follow import wait_for
from mam.jobs.result import Outcome
from mam.org import rules
from mam.org.brief import task_brief
from mam.org.manage import today, world_of
from mam.outcomes import OPEN_STATES, Exit, JobState
from mam.settings import Settings
from mam.store import org as table
from mam.store.org import (
    ASSIGNED,
    BLOCKED,
    BLOCKERS_RESOLVED,
    DONE,
    ENDED,
    FAILED,
    IN_REVIEW,
    REVIEW,
    RUNNING,
    TODO,
    UNBLOCKED,
    RunRow,
    TaskRow,
)
from mam.store.registry import Registry
from mam.workspace import Workspace

log = logging.getLogger(__name__)
IDLE_WAIT_S = 1.0  # a step at least this often: what other processes changed (a task added without a node, a day)
# With nothing for the org at all (no task to run, blocked or firing), this often: the task commands through a
# node wake it at once; a task added where no node serves (MAM_NODE=0) beside a running node is seen this late.
# Every wake-up of an idle node costs CPU (~0.4 ms each on this project's machine kind), so it wakes seldom.
EMPTY_WAIT_S = 10.0


@dataclass(frozen=True)
class Ended:
    """How a task's job ended, as its run records it."""

    outcome: str  # the job's state, or `error` (the delegation itself was refused)
    exit_code: int | None
    detail: str = ""
    disposition: str = ""
    waiting_on: str = ""


def ended_of(out: Outcome) -> Ended:
    return Ended(
        outcome=out.state,
        exit_code=out.exit_code,
        detail=_said(out),
        disposition=str(out.record.get("disposition") or ""),
        waiting_on=str(out.record.get("waiting_on") or ""),
    )


def _said(out: Outcome) -> str:
    """A run's one line: the job's result when it completed, else why it ended."""
    if out.state == JobState.COMPLETED.value:
        return out.result.splitlines()[0] if out.result else ""
    return f"{out.reason}: {out.detail}" if out.detail else out.reason


def job_id_of(task_id: str, k: int) -> str:
    return f"{task_id}-r{k}"


class Scheduler:
    """One workspace's tasks, stepped by `serve` (in the node) or by a test with its own clock."""

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
        self.fire = fire  # drives one run's delegation to its end (the node's attempt: mam.node.service)
        self.wake = threading.Event()
        self.threads: dict[int, threading.Thread] = {}  # run number -> its delegation in this process
        self._lock = threading.Lock()
        self.empty = False  # the last step found nothing for the org at all

    # -- the loop -------------------------------------------------------------------------------
    def pause(self) -> None:
        if self.wake.wait(EMPTY_WAIT_S if self.empty else IDLE_WAIT_S):
            self.wake.clear()

    def step(self) -> list[RunRow]:
        """Unblock, decide and wake what may run now; the runs this step started (new or left by a dead node)."""
        now = self.clock()
        with self.registry.read() as conn:  # most steps find nothing to do: they take no write lock
            waiting = table.tasks(conn, states=(TODO,))
            self.empty = not waiting and not table.tasks(conn, states=(BLOCKED,)) and not table.firing(conn)
            if self.empty:
                return []  # no org, or nothing left for the node: three indexed looks every EMPTY_WAIT_S
            world = world_of(conn, self.settings, now)
            todo = rules.plan(waiting, world)
            due = self._anything_to_do(conn, todo)
        self._tell_capped(todo, world, now)
        if not due:
            return []
        with self.registry.write() as conn:
            for t in table.tasks(conn, states=(BLOCKED,)):
                if t.wait and table.states_of(conn, {t.wait}).get(t.wait) == DONE:
                    table.update_task(conn, t.id, now=now, state=TODO, wake=UNBLOCKED)
            world = world_of(conn, self.settings, now)
            start: list[RunRow] = []
            for t, why in rules.plan(table.tasks(conn, states=(TODO,)), world):
                if why == rules.BLOCKERS and t.wake == ASSIGNED:
                    table.update_task(conn, t.id, now=now, wake=BLOCKERS_RESOLVED)  # what will wake it
                elif not why:
                    start.append(self._wake(conn, t, world, now))
            start += [r for r in table.firing(conn) if r not in start and not self._driven(r.n)]
        for run in start:
            self._start(run)
        return start

    def _anything_to_do(self, conn: Any, todo: list[tuple[TaskRow, str]]) -> bool:
        """A run no thread of ours drives, a blocked task to unblock, or a `todo` task that runs now (or whose
        wake reason moves on)."""
        if any(not why or (why == rules.BLOCKERS and t.wake == ASSIGNED) for t, why in todo):
            return True
        if any(not self._driven(r.n) for r in table.firing(conn)):
            return True
        blocked = table.tasks(conn, states=(BLOCKED,))
        waits = table.states_of(conn, {t.wait for t in blocked if t.wait})
        return any(waits.get(t.wait) == DONE for t in blocked)

    def _tell_capped(self, todo: list[tuple[TaskRow, str]], world: rules.World, now: float) -> None:
        """`daily_cap_reached` for each role with a task held by a daily cap (once per role and day)."""
        for name in sorted({t.role for t, why in todo if why == rules.DAILY_CAP}):
            role = world.roles.get(name)
            if role is not None and role.daily_runs is not None and world.runs_today[name] >= role.daily_runs:
                said = f"role {name} started its {role.daily_runs} task jobs of the day (--daily-runs)"
            else:
                said = f"the workspace started its {world.workspace_cap} task jobs of the day (MAM_ORG_DAILY_RUNS)"
            notify.daily_cap_reached(self.ws, self.settings, name, day=today(now), cap=said)

    def _wake(self, conn: Any, t: TaskRow, world: rules.World, now: float) -> RunRow:
        """Record one wake of `t`: its run, with its job id and brief fixed, and `t` running."""
        role = world.roles[t.role]
        parent = table.task(conn, t.parent) if t.parent else None
        blockers = [b for b in (table.task(conn, x) for x in table.blockers(conn, [t.id]).get(t.id, [])) if b]
        reason = t.wake or ASSIGNED
        brief = task_brief(
            t, role, chain=rules.chain(world.roles, role.name), parent=parent, blockers=blockers, reason=reason
        )
        k = len(table.runs_of(conn, t.id)) + 1
        run = table.add_run(
            conn,
            task_id=t.id,
            job_id=job_id_of(t.id, k),
            role_name=role.name,
            session=role.session,
            reason=reason,
            day=today(now),
            brief=brief,
            now=now,
        )
        table.update_task(conn, t.id, now=now, state=RUNNING, wake="", note="", wait="")
        log.info("task %s woken (%s): job %s on %s", t.id, reason, run.job_id, role.session)
        return run

    def _driven(self, n: int) -> bool:
        with self._lock:
            thread = self.threads.get(n)
            return thread is not None and thread.is_alive()

    # -- firing ---------------------------------------------------------------------------------
    def _start(self, run: RunRow) -> None:
        thread = threading.Thread(target=self._fire, args=(run,), name=f"mam-task-{run.task}", daemon=True)
        with self._lock:
            self.threads[run.n] = thread
        thread.start()

    def _fire(self, run: RunRow) -> None:
        registry = Registry(self.ws)  # a connection of its own: it waits as long as the job runs
        try:
            ended = self._drive(run, registry)
            self.end(run.n, ended)
        finally:
            registry.close()
        self.wake.set()  # the tasks it blocked, or its role's next task, may run now

    def _drive(self, run: RunRow, registry: Registry) -> Ended:
        with registry.read() as conn:
            t = table.task(conn, run.task)
        if (t is None or t.state != RUNNING) and registry.find_job(run.job_id) is None:  # cancelled before its job
            return Ended(JobState.CANCELLED.value, Exit.NOT_DELIVERED, "the task was cancelled before its job was made")
        try:
            req = delegate_request(
                target=run.session,
                brief=run.brief,
                job_id=run.job_id,
                idempotency_key=f"task:{run.job_id}",
                kind=TASK_KIND,
            )
            out = self.fire(req)
            if out.taken_over or out.state in OPEN_STATES:  # another attempt drives it: follow it to its end
                out = wait_for(self.ws, registry, run.job_id, take_over=self.fire) or out
            return ended_of(out)
        except MamError as e:
            return Ended("error", e.exit_code, str(e))
        except Exception as e:
            log.exception("task %s: job %s failed", run.task, run.job_id)
            return Ended("error", Exit.FAILED, f"{type(e).__name__}: {e}")

    def end(self, n: int, ended: Ended) -> None:
        """Record how run `n`'s job ended and move its task (and its role's breaker) on; once."""
        now = self.clock()
        tripped = None
        with self.registry.write() as conn:
            run = table.run(conn, n)
            if run is None or run.status == ENDED:
                return
            moved, tripped = _settle(conn, run, ended, now)
            table.set_run(
                conn,
                n,
                status=ENDED,
                outcome=ended.outcome,
                exit_code=ended.exit_code,
                detail=ended.detail[:500],
                disposition=ended.disposition,
                waiting_on=ended.waiting_on,
                task_state=moved,
                ended_at=now,
            )
        log.info("task %s: job %s ended %s; the task is %s", run.task, run.job_id, ended.outcome, moved or "as it was")
        if tripped is not None:
            notify.breaker_tripped(
                self.ws, self.settings, tripped.name, failures=tripped.failures + 1, since=now, task=run.task,
                job=run.job_id,
            )  # fmt: skip

    def join(self, timeout: float) -> None:
        """Wait for the delegations this process started (tests)."""
        deadline = time.monotonic() + timeout
        for thread in list(self.threads.values()):
            thread.join(max(0.0, deadline - time.monotonic()))


def _settle(conn: Any, run: RunRow, ended: Ended, now: float) -> tuple[str, table.RoleRow | None]:
    """Move the task of `run` as its job's end says (unless something else moved it meanwhile: a person cancelled
    it); the state it moved to ('' : none), and its role if this failure tripped its breaker."""
    t = table.task(conn, run.task)
    runs = table.runs_of(conn, run.task)
    if t is None or t.state != RUNNING or not runs or runs[-1].n != run.n:
        return "", None
    role = table.role(conn, t.role)
    if ended.outcome == JobState.COMPLETED.value:
        if role is not None and role.failures:
            table.update_role(conn, role.name, now=now, failures=0)
        if ended.disposition == BLOCKED and ended.waiting_on:
            table.update_task(conn, t.id, now=now, state=BLOCKED, wait=ended.waiting_on, wake=UNBLOCKED)
            return BLOCKED, None
        if ended.disposition == REVIEW:
            table.update_task(conn, t.id, now=now, state=IN_REVIEW)
            return IN_REVIEW, None
        table.update_task(conn, t.id, now=now, state=DONE, ended_at=now)
        return DONE, None
    table.update_task(conn, t.id, now=now, state=FAILED, ended_at=now)
    if role is None:
        return FAILED, None
    failures = role.failures + 1
    trips = not role.tripped and failures >= role.breaker
    table.update_role(conn, role.name, now=now, failures=failures, **({"tripped_at": now} if trips else {}))
    return FAILED, role if trips else None
