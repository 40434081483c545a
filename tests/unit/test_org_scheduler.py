"""The org scheduler's decisions against a real registry (issue 42), its delegations held in the test's hand: a
role's next task never goes to a session its last one still holds, even before that one's job is registered, and a
run a dead node left is driven again under its own job id. (The same paths with demo agents, the real node and node
kills: tests/e2e/test_org.py, tests/faults/tasks.py.)"""

from __future__ import annotations

import threading

from mam.jobs.delegate import DelegateRequest
from mam.jobs.result import Outcome
from mam.org.manage import TaskSpec, add_role, add_task, cancel, show_task, world_of
from mam.org.scheduler import Scheduler
from mam.settings import load_settings
from mam.store import org as table
from mam.store.sessions import SessionRow, SessionStatus

SETTINGS = load_settings(env_file=None, environ={})


class Held:
    """A stand-in for the node's attempt: each delegation waits until the test lets it end (completed)."""

    def __init__(self) -> None:
        self.asked: list[DelegateRequest] = []
        self.go = threading.Event()

    def __call__(self, req: DelegateRequest) -> Outcome:
        self.asked.append(req)
        self.go.wait(30)
        return Outcome(job_id=str(req.job_id), state="completed", reason="completed", exit_code=0, result="ok")


def org(registry) -> None:  # type: ignore[no-untyped-def]
    registry.add_session(
        SessionRow(
            name="w", agent="demo", role="dev", backend="tmux", server="none", cwd="/", status=SessionStatus.RUNNING
        )
    )
    add_role(registry, "dev", session="w")


def test_a_roles_next_task_waits_while_its_last_runs_job_is_not_even_registered(store) -> None:
    ws, registry = store
    org(registry)
    first = add_task(registry, TaskSpec("one", "dev"), SETTINGS)["id"]
    second = add_task(registry, TaskSpec("two", "dev"), SETTINGS)["id"]
    fire = Held()
    scheduler = Scheduler(ws, SETTINGS, registry, fire=fire)
    try:
        assert [r.task for r in scheduler.step()] == [first]
        # Its delegation has registered no job (it is held): the session is still the first task's.
        assert scheduler.step() == [] and show_task(registry, second, SETTINGS)["queued_for"] == "busy"
        fire.go.set()
        scheduler.join(30)
        assert show_task(registry, first, SETTINGS)["state"] == "done"
        assert [r.task for r in scheduler.step()] == [second]
        scheduler.join(30)
    finally:
        fire.go.set()
    assert [req.job_id for req in fire.asked] == [f"{first}-r1", f"{second}-r1"]
    assert {req.kind for req in fire.asked} == {"task"}


def test_a_run_left_firing_by_a_dead_node_is_driven_again_under_its_own_job_id(store) -> None:
    ws, registry = store
    org(registry)
    task = add_task(registry, TaskSpec("one", "dev"), SETTINGS)["id"]
    dead = Held()
    gone = Scheduler(ws, SETTINGS, registry, fire=dead)
    gone.step()  # a node that woke the task, then died (its delegation never returns while the test looks)
    with registry.read() as conn:
        (run,) = table.firing(conn)
    fire = Held()
    fire.go.set()
    nxt = Scheduler(ws, SETTINGS, registry, fire=fire)  # the next node: no thread of its drives the run
    assert [r.n for r in nxt.step()] == [run.n]
    nxt.join(30)
    dead.go.set()  # the dead node's thread, let go: the run's end is recorded once already
    gone.join(30)
    assert [req.job_id for req in fire.asked] == [run.job_id]
    assert fire.asked[0].brief == run.brief and fire.asked[0].idempotency_key == f"task:{run.job_id}"
    shown = show_task(registry, task, SETTINGS)
    assert (shown["state"], shown["jobs"]) == ("done", [run.job_id])


def test_a_task_cancelled_before_its_runs_job_was_made_gets_no_job(store) -> None:
    ws, registry = store
    org(registry)
    task = add_task(registry, TaskSpec("one", "dev"), SETTINGS)["id"]
    fire = Held()
    fire.go.set()
    scheduler = Scheduler(ws, SETTINGS, registry, fire=fire)
    with registry.write() as conn:  # the wake, as a step records it, then `mam task cancel` before the thread runs
        (t,) = table.tasks(conn, states=(table.TODO,))
        run = scheduler._wake(conn, t, world_of(conn, SETTINGS, 0.0), 0.0)
    cancel(registry, task)
    scheduler._start(run)
    scheduler.join(30)
    assert fire.asked == []
    shown = show_task(registry, task, SETTINGS)
    assert shown["state"] == "cancelled" and shown["wakes"][0]["outcome"] == "cancelled"
