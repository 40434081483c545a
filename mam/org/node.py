"""The org's part of the node (mam.node.server starts `serve` in a thread): the scheduler that wakes tasks.
Its delegations are the node's attempts (sharing its broker connection)."""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable

from mam.jobs.delegate import DelegateRequest
from mam.jobs.result import Outcome
from mam.org import rules
from mam.org.manage import world_of
from mam.org.scheduler import Scheduler
from mam.settings import Settings
from mam.store import org as table
from mam.store.registry import Registry
from mam.workspace import Workspace

log = logging.getLogger(__name__)


def serve(
    ws: Workspace,
    settings: Settings,
    stop: threading.Event,
    fire: Callable[[DelegateRequest], Outcome],
    on_wake: Callable[[Callable[[], None]], None],
) -> None:
    """Wake the workspace's tasks until `stop` is set: each run's delegation through `fire` (the node's
    attempt); `on_wake` is handed how to wake the scheduler (a task added, done, reopened; a breaker reset)."""
    registry = Registry(ws)
    scheduler = Scheduler(ws, settings, registry, fire=fire)
    on_wake(scheduler.wake.set)
    try:
        while not stop.is_set():
            try:
                scheduler.step()
            except Exception:
                log.exception("an org step failed; trying again")
            scheduler.pause()
    finally:
        registry.close()


def keeps_node(ws: Workspace, settings: Settings) -> bool:
    """Whether a task keeps the node from ending for idleness: one whose job the node has yet to see end, a
    blocked one whose wait is done, or a `todo` one that can run without a person (not held by its blockers
    or a tripped breaker: those need a person's command, which starts a node)."""
    registry = Registry.open_existing(ws)
    if registry is None:
        return False
    try:
        with registry.read() as conn:
            if table.firing(conn):
                return True
            blocked = table.tasks(conn, states=(table.BLOCKED,))
            waits = table.states_of(conn, {t.wait for t in blocked if t.wait})
            if any(waits.get(t.wait) == table.DONE for t in blocked):
                return True
            todo = table.tasks(conn, states=(table.TODO,))
            if not todo:
                return False
            plan = rules.plan(todo, world_of(conn, settings, time.time()))
            return any(why not in (rules.BLOCKERS, rules.BREAKER) for _t, why in plan)
    finally:
        registry.close()
