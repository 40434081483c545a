"""The routines' part of the node (mam.node.server starts `serve` in a thread): the scheduler and,
while any routine has a webhook, its loopback endpoint. Their delegations are the node's attempts
(sharing its broker connection)."""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable

from mam.jobs.delegate import DelegateRequest
from mam.jobs.result import Outcome
from mam.routines.fire import Scheduler
from mam.routines.webhook import Endpoint
from mam.settings import Settings
from mam.store import routines as table
from mam.store.registry import Registry
from mam.workspace import Workspace

log = logging.getLogger(__name__)


def serve(
    ws: Workspace,
    settings: Settings,
    stop: threading.Event,
    fire: Callable[[DelegateRequest], Outcome],
    on_wake: Callable[[Callable[[], None]], None],
    on_close: Callable[[Callable[[], None]], None],
) -> None:
    """Fire the workspace's routines until `stop` is set: each tick's delegation through `fire` (the node's
    attempt); `on_wake` is handed how to wake the scheduler (a routine added, resumed or run), `on_close` how to
    close the webhook's port from another thread (the node's, as it ends)."""
    registry = Registry(ws)
    scheduler = Scheduler(ws, settings, registry, fire=fire)
    on_wake(scheduler.wake.set)
    endpoint = Endpoint(registry, clock=time.time, on_tick=scheduler.wake.set)
    on_close(endpoint.close)
    serving = False
    try:
        while not stop.is_set():
            following = None
            try:
                if serving or _any_webhook(registry):
                    serving = True
                    endpoint.keep_serving()  # its recorded port, tried again while another program holds it
                following = scheduler.step()
            except Exception:
                log.exception("a routines step failed; trying again")
            scheduler.pause(following)
    finally:
        endpoint.stop()
        registry.close()


def _any_webhook(registry: Registry) -> bool:
    with registry.read() as conn:
        return any(r.secret for r in table.list_all(conn))


def keeps_node(ws: Workspace) -> bool:
    """Whether an enabled routine keeps the node from ending for idleness."""
    registry = Registry.open_existing(ws)
    if registry is None:
        return False
    try:
        with registry.read() as conn:
            return table.any_enabled(conn)
    finally:
        registry.close()
