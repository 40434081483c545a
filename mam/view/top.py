"""`mam top`: the full-screen live view (Textual). Imported only by `mam top`, never at start-up.

It shows `model.snapshot()` in three tables and reloads it when the broker says a job moved
(debounced), every `BUSY_S` while a job is open (its deadline bars move) and every `IDLE_S`
otherwise; nothing spins in between. When the broker goes away it says so in the header and keeps
reloading from the registry. Keys: Enter attaches to the selected session's pane, `c` cancels the
selected job and `s` stops the selected session (each after a confirmation), `/` filters, `h` shows
the HOSTS (every node on the broker, from their signed presence: mam.remote.fleet; Enter on one shows
its sessions and open jobs), `q` quits.
Looking never starts anything: no broker, server, pane or session.
"""

from __future__ import annotations

import os
import threading
import time
from typing import Any

import libtmux  # noqa: F401  (now: it reads sys.stdout.encoding when imported, and Textual replaces sys.stdout)
from rich.text import Text
from textual.app import App, ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical
from textual.message import Message
from textual.screen import ModalScreen
from textual.widgets import Button, DataTable, Footer, Input, Label, Static

from mam.bus.connect import open_client
from mam.bus.topics import Topics
from mam.errors import BrokerError, MamError
from mam.jobs.pause import cancel_job
from mam.outcomes import Exit
from mam.remote.fleet import FleetTable
from mam.settings import Settings
from mam.store.registry import Registry
from mam.view import render
from mam.view.model import Snapshot, snapshot
from mam.workspace import Workspace

BUSY_S = 2.0
IDLE_S = 10.0
DEBOUNCE_S = 0.25
QUIT_GRACE_S = 3.0  # after q: the process ends by then even if a loader thread or the broker's close still runs


# From the broker's and the loaders' threads to the app: post_message is thread-safe and never waits
# (call_from_thread waits for the app, which deadlocks a thread the app is joining while it exits).
class Loaded(Message):
    def __init__(self, snap: Snapshot) -> None:
        super().__init__()
        self.snap = snap


class BrokerChanged(Message):
    def __init__(self, state: str) -> None:
        super().__init__()
        self.state = state


class JobMoved(Message):
    """Something happened: reload soon."""


class FleetMoved(Message):
    """A node's presence came: show the hosts again."""


class Notice(Message):
    def __init__(self, text: str, severity: str = "information") -> None:
        super().__init__()
        self.text, self.severity = text, severity


class Confirm(ModalScreen[bool]):
    """A yes/no question; Enter or `y` says yes, Escape or `n` says no."""

    BINDINGS = [Binding("y", "answer(True)", "yes"), Binding("n,escape", "answer(False)", "no")]
    DEFAULT_CSS = """
    Confirm { align: center middle; }
    Confirm > Vertical { width: 90%; max-width: 100; height: auto; border: thick $warning; padding: 1 2;
                         background: $surface; }
    Confirm #question { width: 100%; }
    Confirm Horizontal { height: auto; margin-top: 1; }
    Confirm Button { margin-right: 2; }
    """

    def __init__(self, question: str) -> None:
        super().__init__()
        self.question = question

    def compose(self) -> ComposeResult:
        with Vertical():
            yield Label(self.question, id="question")
            with Horizontal():
                yield Button("Yes (y)", variant="error", id="yes")
                yield Button("No (n)", variant="primary", id="no")

    def on_mount(self) -> None:
        self.query_one("#no", Button).focus()

    def on_button_pressed(self, event: Button.Pressed) -> None:
        self.dismiss(event.button.id == "yes")

    def action_answer(self, yes: bool) -> None:
        self.dismiss(yes)


class TopApp(App[tuple[str, str] | None]):
    """Returns ("attach", session) when Enter was pressed on a session, else None."""

    TITLE = "mam top"
    CSS = """
    #head { height: 1; background: $boost; padding: 0 1; }
    #filter { display: none; }
    #filter.shown { display: block; }
    .title { height: 1; padding: 0 1; color: $accent; text-style: bold; }
    DataTable { height: auto; max-height: 16; }
    #jobs { max-height: 14; }
    .hosts { display: none; }
    .hosts.shown { display: block; }
    #host-detail { height: auto; padding: 0 1; }
    """
    BINDINGS = [
        Binding("q", "quit", "quit"),
        Binding("ctrl+c", "interrupt", show=False, priority=True),  # as every long-running command: exit 130
        Binding("slash", "filter", "filter"),
        Binding("c", "cancel_job", "cancel job"),
        Binding("s", "stop_session", "stop session"),
        Binding("h", "toggle_hosts", "hosts"),
        Binding("tab", "focus_next", "next table", show=False),
        Binding("escape", "clear_filter", "clear filter", show=False),
    ]

    def __init__(self, ws: Workspace, settings: Settings, *, follow_broker: bool = True) -> None:
        super().__init__()
        self.ws, self.settings = ws, settings.with_overrides(MAM_NO_AUTOSTART="1")
        self.follow_broker = follow_broker
        self.snap: Snapshot | None = None
        self.filter_text = ""
        self.broker = "unknown"
        self._client: Any = None
        self._pending = threading.Event()
        self._last_load = 0.0
        self._loading = False
        secret = self.settings.dispatch_secret
        self.fleet = FleetTable(secret) if secret else None  # every node's presence, once the broker is followed
        self.picked_host = ""

    # -- layout -------------------------------------------------------------------------------
    def compose(self) -> ComposeResult:
        yield Static("mam top", id="head")
        yield Input(
            placeholder="filter: part of a session, agent, role, job or loop (Enter keeps, Esc clears)", id="filter"
        )
        hosts = "HOSTS  (arrows + Enter: a host's sessions and jobs; h: hide)"
        if self.fleet is None:
            hosts += "  no MAM_DISPATCH_SECRET: a node's presence cannot be checked"
        yield Static(hosts, id="hosts-title", classes="title hosts")
        yield DataTable(id="hosts", cursor_type="row", zebra_stripes=True, classes="hosts")
        yield Static("", id="host-detail", classes="hosts")
        yield Static("SESSIONS  (Enter: attach, s: stop)", classes="title")
        yield DataTable(id="sessions", cursor_type="row", zebra_stripes=True)
        yield Static("OPEN JOBS  (c: cancel)", classes="title")
        yield DataTable(id="jobs", cursor_type="row", zebra_stripes=True)
        yield Static("LOOPS", classes="title")
        yield DataTable(id="loops", cursor_type="row", zebra_stripes=True)
        yield Static("ROUTINES", classes="title")
        yield DataTable(id="routines", cursor_type="row", zebra_stripes=True)
        yield Static("TASKS  (queued_for: what holds a todo task)", classes="title")
        yield DataTable(id="tasks", cursor_type="row", zebra_stripes=True)
        yield Static("ROLES", classes="title")
        yield DataTable(id="roles", cursor_type="row", zebra_stripes=True)
        yield Footer()

    def on_mount(self) -> None:
        self.query_one("#sessions", DataTable).add_columns(*render.SESSION_COLUMNS)
        self.query_one("#jobs", DataTable).add_columns(*render.JOB_COLUMNS)
        self.query_one("#loops", DataTable).add_columns(*render.LOOP_COLUMNS)
        self.query_one("#routines", DataTable).add_columns(*render.ROUTINE_COLUMNS)
        self.query_one("#tasks", DataTable).add_columns(*render.TASK_COLUMNS)
        self.query_one("#roles", DataTable).add_columns(*render.ROLE_COLUMNS)
        self.query_one("#hosts", DataTable).add_columns(*render.HOST_COLUMNS)
        self.query_one("#sessions", DataTable).focus()
        if self.follow_broker:
            threading.Thread(target=self._connect, name="mam-top-broker", daemon=True).start()
        self.reload()
        self.set_interval(BUSY_S, self._tick)

    async def action_quit(self) -> None:
        # Nothing of top's needs finishing (loaders only read; the registry is crash-safe), and a thread
        # stuck on a loaded machine (a pane listing, the broker's close) must not keep `q` from ending it.
        guard = threading.Timer(QUIT_GRACE_S, os._exit, args=(Exit.OK,))
        guard.daemon = True
        guard.start()
        self.exit()

    async def action_interrupt(self) -> None:
        """Ctrl-C (a key here: the terminal is raw): leave as `q` does, the command exiting 130."""
        guard = threading.Timer(QUIT_GRACE_S, os._exit, args=(Exit.INTERRUPTED,))
        guard.daemon = True
        guard.start()
        self.exit(("interrupted", ""))

    def on_unmount(self) -> None:
        if self._client is not None:  # closed aside: quitting never waits on the broker
            threading.Thread(target=self._client.close, name="mam-top-close", daemon=True).start()

    # -- loading ------------------------------------------------------------------------------
    def _connect(self) -> None:

        try:
            client = open_client(self.settings, self.ws, role="top", autostart=False, timeout=2)
            topics = Topics.of(self.settings, self.ws)

            def on_message(topic: str, payload: bytes, retained: bool) -> None:
                if payload and not retained:
                    self.post_message(JobMoved())

            client.subscribe(topics.all_events(), on_message)
            client.subscribe(topics.all_states(), on_message)
            fleet = self.fleet
            if fleet is not None:

                def on_presence(_topic: str, payload: bytes, retained: bool) -> None:
                    if fleet.feed(payload, retained=retained):
                        self.post_message(FleetMoved())

                client.subscribe(topics.all_presence(), on_presence)
        except (BrokerError, RuntimeError):
            self.post_message(BrokerChanged("down"))
            return

        def on_change(up: bool) -> None:
            self.post_message(BrokerChanged("up" if up else "down"))

        client.on_connection_change = on_change
        self._client = client
        self.post_message(BrokerChanged("up"))

    def on_loaded(self, message: Loaded) -> None:
        self.show(message.snap)

    def on_broker_changed(self, message: BrokerChanged) -> None:
        self._set_broker(message.state)

    def on_job_moved(self, _message: JobMoved) -> None:
        self.reload_soon()

    def on_fleet_moved(self, _message: FleetMoved) -> None:
        self.show_hosts()

    def on_notice(self, message: Notice) -> None:
        self.notify(message.text, severity=message.severity)  # type: ignore[arg-type]

    def _set_broker(self, state: str) -> None:
        self.broker = state
        if self.snap is not None:
            self.snap.broker = state
            self._show_head()

    def _tick(self) -> None:
        self.show_hosts()  # a node not heard for a while turns offline on the clock, with no message
        busy = bool(self.snap and self.snap.jobs)
        if busy or time.monotonic() - self._last_load >= IDLE_S:
            self.reload()

    def reload_soon(self) -> None:
        if not self._pending.is_set():
            self._pending.set()
            self.set_timer(DEBOUNCE_S, self.reload)

    def reload(self) -> None:
        self._pending.clear()
        if self._loading:
            return
        self._loading = True
        self._last_load = time.monotonic()
        self.run_worker(self._load, thread=True, exclusive=True, group="load")

    def _load(self) -> None:
        try:
            snap = snapshot(self.ws, self.settings, broker=self.broker)
        except Exception as e:  # keep showing the last view; say what failed
            self.post_message(Notice(f"could not read the workspace: {e}", "error"))
            snap = None
        finally:
            self._loading = False
        if snap is not None:
            self.post_message(Loaded(snap))

    # -- showing ------------------------------------------------------------------------------
    def _match(self, *values: str) -> bool:
        needle = self.filter_text.lower()
        return not needle or any(needle in v.lower() for v in values)

    def _on_screen(self) -> bool:
        """False while the app leaves: a message from the broker's or a loader's thread, or the clock's tick, can
        land after the screen lost its widgets (seen on a loaded machine: NoMatches '#hosts' as a run ended)."""
        return bool(self.query("#head"))

    def _show_head(self) -> None:
        assert self.snap is not None
        if not self._on_screen():
            return
        text = render.header(self.snap)
        if self.filter_text:
            text += f"  filter: {self.filter_text!r}"
        self.query_one("#head", Static).update(text)

    def show(self, snap: Snapshot) -> None:
        snap.broker = self.broker
        self.snap = snap
        if not self._on_screen():
            return
        now = snap.taken_ms
        self._show_head()
        width = self.size.width or 120  # every column on screen: the widest shrink, text cut with an ellipsis
        sessions = [s for s in snap.sessions if self._match(s.name, s.agent, s.role, s.job, s.state)]
        cells = render.fit(render.SESSION_COLUMNS, [render.session_cells(s, now) for s in sessions], width, keep=6)
        self._fill(
            "#sessions",
            [
                (
                    s.name,
                    (Text(c, style=render.COLOURS.get(s.state, "")) if i in (0, 4) else c for i, c in enumerate(row)),
                )
                for s, row in zip(sessions, cells)
            ],
        )
        jobs = [j for j in snap.jobs if self._match(j.id, j.session, j.state)]
        rows = render.fit(render.JOB_COLUMNS, [render.job_cells(j, now) for j in jobs], width, keep=-1)
        self._fill("#jobs", [(j.id, row) for j, row in zip(jobs, rows)])
        loops = [x for x in snap.loops if self._match(x.id, x.creator, *(r for r, _ in x.verdicts))]
        rows = render.fit(render.LOOP_COLUMNS, [render.loop_cells(x) for x in loops], width, keep=-1)
        self._fill("#loops", [(x.id, row) for x, row in zip(loops, rows)])
        routines = [r for r in snap.routines if self._match(r.name, r.target, r.state)]
        rows = render.fit(render.ROUTINE_COLUMNS, [render.routine_cells(r) for r in routines], width, keep=4)
        self._fill("#routines", [(r.name, row) for r, row in zip(routines, rows)])
        tasks = [t for t in snap.tasks if self._match(t.id, t.role, t.state, t.queued_for, t.title, t.job)]
        rows = render.fit(render.TASK_COLUMNS, [render.task_cells(t) for t in tasks], width, keep=-1)
        self._fill("#tasks", [(t.id, row) for t, row in zip(tasks, rows)])
        roles = [r for r in snap.roles if self._match(r.name, r.session, r.reports_to)]
        rows = render.fit(render.ROLE_COLUMNS, [render.role_cells(r) for r in roles], width, keep=-1)
        self._fill("#roles", [(r.name, row) for r, row in zip(roles, rows)])

    def show_hosts(self) -> None:
        if self.fleet is None or not self._on_screen() or not self.query_one("#hosts", DataTable).has_class("shown"):
            return
        now = int(time.time() * 1000)
        hosts = [h for h in self.fleet.rows(now) if self._match(h.name, h.host, h.state)]
        rows = render.fit(render.HOST_COLUMNS, [render.host_cells(h, now) for h in hosts], self.size.width or 120)
        self._fill("#hosts", [(h.name, row) for h, row in zip(hosts, rows)])
        picked = next((h for h in hosts if h.name == self.picked_host), None)
        self.query_one("#host-detail", Static).update(render.host_detail(picked, now) if picked else "")

    def on_resize(self, _event: Any) -> None:
        if self.snap is not None:
            self.show(self.snap)
        self.show_hosts()

    def _fill(self, selector: str, rows: list[tuple[str, Any]]) -> None:
        table = self.query_one(selector, DataTable)
        selected = self._selected_key(table)
        headers = [str(c.label) for c in table.ordered_columns]
        table.clear(columns=True)  # the columns too: their widths follow the cells, which fit the screen now
        table.add_columns(*headers)
        for key, cells in rows:
            table.add_row(*cells, key=key)
        keys = [k for k, _ in rows]
        if selected in keys:
            table.move_cursor(row=keys.index(selected))

    @staticmethod
    def _selected_key(table: DataTable) -> str | None:  # type: ignore[type-arg]
        if table.row_count == 0:
            return None
        try:
            return str(table.coordinate_to_cell_key(table.cursor_coordinate).row_key.value)
        except Exception:
            return None

    # -- actions ------------------------------------------------------------------------------
    def action_filter(self) -> None:
        box = self.query_one("#filter", Input)
        box.add_class("shown")
        box.focus()

    def on_input_changed(self, event: Input.Changed) -> None:
        self.filter_text = event.value.strip()
        if self.snap is not None:
            self.show(self.snap)

    def on_input_submitted(self, event: Input.Submitted) -> None:
        self.query_one("#sessions", DataTable).focus()

    def action_clear_filter(self) -> None:
        box = self.query_one("#filter", Input)
        box.value = ""
        box.remove_class("shown")
        self.filter_text = ""
        self.query_one("#sessions", DataTable).focus()
        if self.snap is not None:
            self.show(self.snap)

    def on_data_table_row_selected(self, event: DataTable.RowSelected) -> None:
        if event.data_table.id == "sessions" and event.row_key.value:
            self.attach(str(event.row_key.value))
        elif event.data_table.id == "hosts" and event.row_key.value:
            self.picked_host = str(event.row_key.value)
            self.show_hosts()

    def action_toggle_hosts(self) -> None:
        """Show the HOSTS (and focus them) or hide them again."""
        shown = not self.query_one("#hosts", DataTable).has_class("shown")
        for widget in self.query(".hosts"):
            widget.set_class(shown, "shown")
        if shown:
            self.show_hosts()
            self.query_one("#hosts", DataTable).focus()
        else:
            self.picked_host = ""
            self.query_one("#sessions", DataTable).focus()

    def attach(self, name: str) -> None:
        """Put this terminal on the session's pane; back here when the person detaches. Where the
        terminal cannot be handed over (no real terminal), end and let `mam top` attach instead."""
        from textual.app import SuspendNotSupported

        from mam.sessions.attach import attach_argv, run_attach

        try:
            steps = attach_argv(name, ws=self.ws, settings=self.settings)
        except MamError as e:
            self.notify(str(e), severity="error")
            return
        try:
            with self.suspend():
                run_attach(steps)
        except SuspendNotSupported:
            self.exit(("attach", name))
            return
        self.reload()

    def action_cancel_job(self) -> None:
        job = self._selected_key(self.query_one("#jobs", DataTable))
        if not job:
            self.notify("no open job selected", severity="warning")
            return

        def answered(yes: bool | None) -> None:
            if yes:
                self.run_worker(lambda: self._cancel(job), thread=True, group="act")

        self.push_screen(
            Confirm(f"Cancel job {job}? Its agent's turn on it is interrupted (the agent keeps running)."), answered
        )

    def _cancel(self, job: str) -> None:
        try:
            registry = Registry(self.ws)
            try:
                view = cancel_job(self.ws, self.settings, registry, job)
            finally:
                registry.close()
            self.post_message(Notice(f"job {job}: {view['state']} ({view['reason']})"))
        except MamError as e:
            self.post_message(Notice(str(e), "error"))
        self.post_message(JobMoved())

    def action_stop_session(self) -> None:
        name = self._selected_key(self.query_one("#sessions", DataTable))
        if not name:
            self.notify("no session selected", severity="warning")
            return

        def answered(yes: bool | None) -> None:
            if yes:
                self.run_worker(lambda: self._stop(name), thread=True, group="act")

        self.push_screen(
            Confirm(f"Stop session {name}? Its agent exits; `mam session resume` brings it back."), answered
        )

    def _stop(self, name: str) -> None:
        from mam.sessions.stop import stop_session

        try:
            registry = Registry(self.ws)
            try:
                row = stop_session(name, ws=self.ws, settings=self.settings, registry=registry)
            finally:
                registry.close()
            self.post_message(Notice(f"session {name}: {row.status}"))
        except MamError as e:
            self.post_message(Notice(str(e), "error"))
        self.post_message(JobMoved())
