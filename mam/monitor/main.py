"""The monitor loop: reconcile sessions and orphaned jobs every interval; follow job events over
MQTT when asked (`--subscribe`), falling back to polling while the broker is down and
resubscribing by itself when it returns.

Between passes it sleeps on an event with the next pass as its deadline: a pane that died or a
wrapper killed -9 announces nothing, so the interval is what finds them. An event for a job it
follows (its wrapper is gone) wakes it at once, for that job only (no pass over the panes)."""

from __future__ import annotations

import json
import logging
import os
import threading
import time
from dataclasses import dataclass, field
from typing import Any

from mam.bus.connect import open_client
from mam.bus.mqtt import MqttClient
from mam.bus.topics import Topics, prefix_for
from mam.errors import BrokerError, LockBusy
from mam.jobs.record import now_ms
from mam.monitor.jobs import OrphanFollower
from mam.monitor.sessions import reconcile_sessions
from mam.settings import Settings
from mam.store.registry import Registry
from mam.util.flock import FileLock, LockTimeout
from mam.util.fs import append_line
from mam.workspace import Workspace

log = logging.getLogger(__name__)


@dataclass
class Monitor:
    ws: Workspace
    settings: Settings
    subscribe: bool = False
    interval: float | None = None
    echo: Any = None  # callable(str) for live output
    client: MqttClient | None = None
    passes: int = 0
    repairs: list[dict[str, Any]] = field(default_factory=list)
    _stop: threading.Event = field(default_factory=threading.Event)
    _news: threading.Event = field(default_factory=threading.Event)  # an event for a followed orphan
    _broker_state: str = "unknown"
    _last_pass: float = 0.0  # the first pass looks at every job
    name: str = "monitor"  # its single-instance lock and pid file: `mam monitor`'s, or the node's own ("node-monitor")

    def __post_init__(self) -> None:
        # Looking never starts anything: no server, no pane, no embedded broker.
        self.settings = self.settings.with_overrides(MAM_NO_AUTOSTART="1")
        self.registry = Registry(self.ws)
        self.orphans = OrphanFollower(self.ws, self.registry)
        self.topics = Topics(prefix_for(self.settings, self.ws))
        self.log_path = self.ws.state / "monitor.jsonl"
        self.every = self.interval if self.interval is not None else self.settings.monitor_interval_s

    def stop(self) -> None:
        self._stop.set()
        self._news.set()

    def run(self, *, once: bool = False, max_passes: int | None = None) -> list[dict[str, Any]]:

        lock = FileLock(str(self.ws.lock(self.name)))
        try:
            lock.acquire(timeout=0)
        except LockTimeout as e:
            raise LockBusy(
                f"a monitor already runs for workspace {self.ws.root} (see {self.ws.run_dir / f'{self.name}.pid'})"
            ) from e
        pidfile = self.ws.run_dir / f"{self.name}.pid"
        pidfile.write_text(f"{os.getpid()}\n")
        try:
            next_pass = 0.0
            while not self._stop.is_set():
                if time.monotonic() >= next_pass:
                    if self.subscribe:
                        self._ensure_subscribed()
                    self.reconcile()
                    next_pass = time.monotonic() + self.every
                    if once or (max_passes is not None and self.passes >= max_passes):
                        break
                else:
                    self.follow_orphans()
                self._news.wait(max(0.0, next_pass - time.monotonic()))
                self._news.clear()
        finally:
            if self.client is not None:
                self.client.close()
            pidfile.unlink(missing_ok=True)
            lock.release()
        return self.repairs

    def reconcile(self) -> None:
        self.passes += 1
        existed = self.ws.mirror_path.exists()
        if self.ws.db_path.exists() and self.registry.refresh_mirror():
            # A writer killed between its commit and the mirror leaves the YAML one generation behind.
            if existed:
                self.note("repair", what="mirror", session="", reason="the sessions mirror was behind the database")
            elif self.registry.sessions():  # a new, empty registry's first mirror is no repair
                self.note("repair", what="mirror", session="", reason="the sessions mirror was missing")
        for r in reconcile_sessions(self.ws, self.settings, self.registry):
            self.note("repair", what=r.what, session=r.session, reason=r.reason)
        since, self._last_pass = self._last_pass, time.time()
        for job_id, what in self.orphans.export_orphans(since - 5.0):
            self.note("repair", what="audit", job=job_id, reason=what)
        self.follow_orphans()

    def follow_orphans(self) -> None:
        """Take what arrived for the jobs whose wrappers are gone (and end those past a deadline)."""
        for job_id, what in self.orphans.step():
            self.note("repair", what="job", job=job_id, reason=what)

    # -- broker -------------------------------------------------------------------------------
    def _ensure_subscribed(self) -> None:
        if self.client is not None:
            return  # paho reconnects and resubscribes by itself; see _on_connection
        try:
            self.client = open_client(self.settings, self.ws, role="monitor", autostart=False, timeout=2)
        except BrokerError as e:
            self._set_broker("down", str(e))
            return
        self.client.on_connection_change = lambda up: self._set_broker(
            "up" if up else "down", "reconnected and resubscribed" if up else "connection lost"
        )
        self.client.subscribe(self.topics.all_events(), self._on_event)
        self._set_broker("up", "subscribed")

    def _set_broker(self, state: str, detail: str) -> None:
        if state != self._broker_state:
            self._broker_state = state
            self.note(
                "broker_" + state, detail=detail + ("; polling the store and the panes" if state == "down" else "")
            )

    def _on_event(self, topic: str, payload: bytes, _retained: bool) -> None:
        job_id = self.topics.job_of(topic)
        if job_id and self.orphans.wants(job_id):
            self.orphans.feed(job_id, payload)
            self._news.set()

    def note(self, kind: str, **fields: Any) -> None:
        entry = {"ts_ms": now_ms(), "kind": kind, **fields}
        self.repairs.append(entry) if kind == "repair" else None
        append_line(self.log_path, json.dumps(entry, sort_keys=True, default=str))
        if self.echo is not None:
            detail = " ".join(f"{k}={v}" for k, v in fields.items())
            self.echo(f"{time.strftime('%H:%M:%S')} {kind} {detail}")
