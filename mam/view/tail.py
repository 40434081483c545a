"""`mam tail`: follow every job transition, event and loop step of the workspace, live.

The broker says when something happened (a message on `<prefix>/jobs/+/events` or
`<prefix>/jobs/+/state` names the job); the registry says what, in order (see `feed`). A job's
transitions that no message announces (its creation, the paste, a deadline) are picked up by the
next message about it, by the job's final state, or by a sweep of recently changed jobs every
`SWEEP_S`. With no broker (or when it goes away) the sweep runs every `DOWN_SWEEP_S` instead, and a
note says so; a broker that was down at the start is tried again every `RECONNECT_S` (a note says
when it is back; once connected, the client reconnects by itself). It never starts a broker, a
pane or a session, and never creates a registry.

The loop waits on a pipe, not a lock: the broker's thread and Ctrl-C (`interrupt`, called under
`mam.util.interrupts.noted()`, which says why no KeyboardInterrupt is raised) wake it by writing a byte.
"""

from __future__ import annotations

import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass

from mam.bus.connect import open_client
from mam.bus.mqtt import MqttClient
from mam.bus.topics import Topics
from mam.errors import BrokerError
from mam.settings import Settings
from mam.util.wakepipe import WakePipe
from mam.view.feed import Feed, Line
from mam.workspace import Workspace

SWEEP_S = 5.0
DOWN_SWEEP_S = 1.0
RECONNECT_S = 10.0
FOLLOW_UPS_S = (0.15, 0.5, 1.5)  # after a message: re-read the job for the transition its wrapper writes next
DEFAULT_LINES = 10
RECENT_JOBS = 20


@dataclass
class Note:
    """Something about the feed itself (the broker is down, came back)."""

    message: str


Sink = Callable[[Line | Note], None]


def backlog(feed: Feed, *, everything: bool, since: int | None) -> list[Line]:
    """History first: all of it (`--all` / `--since`), else the last DEFAULT_LINES lines (read
    from the newest RECENT_JOBS jobs only, so a long history costs nothing)."""
    if everything or since is not None:
        return feed.read()
    return feed.read(feed.job_ids(newest=RECENT_JOBS))[-DEFAULT_LINES:]


class Tail:
    def __init__(
        self,
        ws: Workspace,
        settings: Settings,
        sink: Sink,
        *,
        job: str | None = None,
        session: str | None = None,
        since: int | None = None,
        everything: bool = False,
    ) -> None:
        self.ws, self.settings, self.sink = ws, settings.with_overrides(MAM_NO_AUTOSTART="1"), sink
        self.feed = Feed(ws, job=job, session=session, since_seq=since)
        self.everything, self.since = everything, since
        self._due: deque[str] = deque()  # jobs a message named, appended by the broker's thread
        self._pipe = WakePipe()
        self.stop = threading.Event()
        self.interrupted = False
        self.client: MqttClient | None = None
        self.broker_up = False

    # -- the broker ---------------------------------------------------------------------------
    def connect(self, *, again: bool = False) -> bool:
        """Follow the broker; False (and a note, unless `again`: a retry says only when it worked) if it is down."""

        try:
            client = open_client(self.settings, self.ws, role="tail", autostart=False, timeout=2)
        except BrokerError as e:
            if not again:
                self.sink(Note(f"the broker is down ({e}); following the registry instead, lines may lag a second"))
            return False
        topics = Topics.of(self.settings, self.ws)

        def on_message(topic: str, payload: bytes, retained: bool) -> None:
            job = topics.job_of(topic)
            if job and payload and not retained and (self.feed.job is None or job == self.feed.job):
                self.wake(job)

        def on_change(up: bool) -> None:
            self.broker_up = up
            self.sink(
                Note("the broker is back; following it" if up else "the broker went away; following the registry")
            )
            self.wake()

        try:
            client.subscribe(topics.all_events(), on_message)
            client.subscribe(topics.all_states(), on_message)
        except BrokerError as e:
            client.close()
            if not again:
                self.sink(Note(f"the broker is down ({e}); following the registry instead"))
            return False
        client.on_connection_change = on_change
        self.client, self.broker_up = client, True
        if again:
            self.sink(Note("the broker is back; following it"))
            self.wake()
        return True

    def close(self) -> None:
        self.stop.set()
        if self.client is not None:
            self.client.close()  # its thread gone: nothing writes to the pipe any more
        self.feed.close()
        self._pipe.close()

    # -- waking the loop: lock-free, from any thread or a signal handler --------------------------
    def wake(self, job: str | None = None) -> None:
        """Wake the loop: to read `job` (and follow it up), or to sweep (None)."""
        if job is not None:
            self._due.append(job)
        self._pipe.wake()

    def interrupt(self) -> None:
        """Ctrl-C: the loop ends at its next look (the CLI exits 130)."""
        self.interrupted = True
        self.wake()

    def _woken(self, timeout: float) -> list[str]:
        """Wait up to `timeout` for a wake; the jobs named since the last call."""
        self._pipe.wait(timeout)
        jobs = []
        while self._due:
            jobs.append(self._due.popleft())
        return jobs

    # -- the loop -----------------------------------------------------------------------------
    def run(self) -> None:
        """Print the backlog, then follow until `stop` is set (Ctrl-C in the CLI)."""
        self.connect()
        if self.feed.job and not self.feed.job_ids():
            self.sink(Note(f"no job {self.feed.job} in this workspace yet; waiting for it"))
        for line in backlog(self.feed, everything=self.everything, since=self.since):
            if self.interrupted:
                return
            self.sink(line)
        last_sweep = time.time()
        last_try = time.monotonic()
        follow_ups: list[tuple[float, str]] = []
        while not self.stop.is_set() and not self.interrupted:
            now = time.monotonic()
            if self.client is None and now - last_try >= RECONNECT_S:
                last_try = now
                self.connect(again=True)
            next_due = min([t for t, _ in follow_ups], default=now + (SWEEP_S if self.broker_up else DOWN_SWEEP_S))
            jobs = self._woken(max(0.0, next_due - now))
            if self.interrupted:
                break
            now = time.monotonic()
            due = {j for t, j in follow_ups if t <= now}
            follow_ups = [(t, j) for t, j in follow_ups if t > now]
            for job in dict.fromkeys(jobs):
                due.add(job)
                follow_ups.extend((now + d, job) for d in FOLLOW_UPS_S)
            if not due:  # the sweep: jobs changed since the last one, and the loops
                started = time.time()
                self.emit(self.feed.read(self.feed.job_ids(updated_since=last_sweep - 1)))
                last_sweep = started
            else:
                self.emit(self.feed.read(sorted(due)))

    def emit(self, lines: list[Line]) -> None:
        for line in lines:
            self.sink(line)
