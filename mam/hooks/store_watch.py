"""Activity from the CLI's own records, for the CLIs that call no hook of mam's (grok, opencode...).

Claude calls `mam hook` on its lifecycle events and codex its `notify` program at each turn's end
(mam.hooks.run). The others offer no per-session hook mam can install without touching the user's
files, but they record their turns in their own store: grok an `events.jsonl` per session, opencode
an `event` log in opencode.db, hermes `messages` rows in state.db (the adapter's `read_activity` and
`activity_store`; docs/agents.md, "Activity from the CLI's own store"). The node runs `serve` in a
thread: every STEP_S it reads what each running session's CLI wrote since the last look and applies
it exactly as a hook call would (mam.hooks.run.apply: the session's activity file, and an `activity`
event of the session's delivered open job), so turn ends drive the reminders and
`ended_without_report`, and a wait shows as `waiting`.

What it reads is folded per look: the records of a look are the agent's state at its end, save each turn
end (every one counts); a permission request counts once it has stayed unanswered WAIT_SETTLE_S (grok
records one for every command, answered at once when an allow rule covers it). A CLI that records a tool
call but not its permission prompt (opencode, hermes) has the pane looked at while a tool call stays open: a
permission prompt there (the adapter's `dialog`) is `waiting`, as mam.hooks.prompt_watch does for Claude.
A record older than the launch (a resumed conversation's) is skipped; one older than the job's claim
never counts for the job, nor does the end of a turn begun before it (`Noted.begun`: a brief handed over
while the CLI still finishes its previous turn is queued, and that turn's end is written after the claim).
"""

from __future__ import annotations

import logging
import socket
import threading
import time
from dataclasses import dataclass, field
from typing import Any

from mam.agents import convo, get_adapter
from mam.agents.base import AgentAdapter, Noted
from mam.hooks import run
from mam.hooks.translate import Activity
from mam.settings import Settings
from mam.store.registry import Registry
from mam.store.sessions import SessionRow, SessionStatus
from mam.workspace import Workspace

log = logging.getLogger(__name__)

STEP_S = 0.5  # how often the CLIs' stores are read (they tell nobody when they change)
IDLE_STEP_S = 2.0  # with no session to watch, how often the registry is looked at for one (each wake costs CPU)
WAIT_SETTLE_S = 1.0  # a permission request unanswered this long is a wait for a person
SCREEN_AFTER_S = 1.0  # a tool call open this long, with no permission record: look at the pane for a prompt
SCREEN_EVERY_S = 1.0  # and again this often while it stays open
DISCOVER_EVERY_S = 2.0  # a session whose CLI has not named its conversation yet: look it up this often


@dataclass
class Watch:
    """What is known of one launch of one session: where its reader is, what was applied last."""

    key: tuple[Any, ...]
    conversation: str = ""
    cursor: dict[str, object] = field(default_factory=dict)
    pending: list[Noted] = field(default_factory=list)  # read, not applied yet (a permission request too fresh)
    state: str = ""
    tool: str = ""
    open_tool: str = ""  # a tool call under way (no permission record of its CLI)
    open_since: float = 0.0  # monotonic
    next_look: float = 0.0  # monotonic: the pane's next look, or the next discovery
    backend: Any = None
    failed: str = ""  # the last error of this launch's reads, logged once (a store that stays unreadable)


def serve(ws: Workspace, settings: Settings, stop: threading.Event) -> None:
    """The node's thread: look every STEP_S until `stop`. With no session to watch it only looks again once
    the registry changed (its files' size or time: a stat every IDLE_STEP_S, where a look opens the registry),
    so a node of sessions whose CLIs call hooks, or none, stays idle."""
    watches: dict[str, Watch] = {}
    seen: tuple[int, ...] = ()
    sleep = stop.wait
    while not stop.is_set():
        stamp = _registry_stamp(ws)
        if watches or stamp != seen:
            seen = stamp
            try:
                look(ws, settings, watches)
            except Exception:
                log.exception("reading the agent CLIs' own records failed")
        sleep(STEP_S if watches else IDLE_STEP_S)


def _registry_stamp(ws: Workspace) -> tuple[int, ...]:
    """What changes whenever the registry does: the size and time of its file and of its write-ahead log."""
    out: list[int] = []
    for path in (ws.db_path, ws.db_path.with_name(ws.db_path.name + "-wal")):
        try:
            st = path.stat()
            out += [st.st_size, st.st_mtime_ns]
        except OSError:
            out += [-1, -1]
    return tuple(out)


def watched(row: SessionRow) -> AgentAdapter | None:
    """The session's adapter when mam reads its CLI's store for activity, and the session runs here."""
    if row.status != SessionStatus.RUNNING or not row.pane_id or row.host not in ("", socket.gethostname()):
        return None
    try:
        adapter = get_adapter(row.agent)
    except Exception:
        return None
    return adapter if adapter.activity_store else None


def look(ws: Workspace, settings: Settings, watches: dict[str, Watch]) -> None:
    """One look at every watched session (the watches of sessions no longer watched are dropped)."""
    registry = Registry.open_existing(ws)
    if registry is None:
        return
    try:
        rows = [(r, a) for r in registry.sessions() if (a := watched(r)) is not None]
    finally:
        registry.close()
    for name in set(watches) - {r.name for r, _a in rows}:
        del watches[name]
    for row, adapter in rows:
        key = (row.launched_at, row.pane_id)
        w = watches.get(row.name)
        if w is None or w.key != key:
            w = watches[row.name] = Watch(key)
        try:
            step(ws, settings, row, adapter, w)
            w.failed = ""
        except Exception as e:
            if f"{e}" != w.failed:  # once per error, not every STEP_S
                log.exception("reading %s's records for session %s failed", row.agent, row.name)
            w.failed = f"{e}"


def step(ws: Workspace, settings: Settings, row: SessionRow, adapter: AgentAdapter, w: Watch) -> None:
    """Read what the session's CLI wrote since the last look, apply it, and look at the pane if need be."""
    mono = time.monotonic()
    conversation = row.conversation_id or w.conversation
    if not conversation and mono >= w.next_look:
        w.next_look = mono + DISCOVER_EVERY_S
        conversation = adapter.discover(cwd=row.cwd, since=row.launched_at or 0.0, env=row.agent_env) or ""
    if not conversation:
        return
    if conversation != w.conversation:
        w.conversation, w.cursor, w.pending = conversation, {}, []
    since = (row.launched_at or 0.0) - convo.TOLERANCE_S
    new = adapter.read_activity(conversation, cwd=row.cwd, env=row.agent_env, cursor=w.cursor) or []
    w.pending += [n for n in new if n.at >= since]
    for noted in settle(w, time.time()):
        if noted.tool_open != bool(w.open_tool) or (noted.tool_open and noted.tool != w.open_tool):
            w.open_tool, w.open_since = (noted.tool if noted.tool_open else ""), mono
        if not noted.turn_end and (noted.state, noted.tool) == (w.state, w.tool):
            continue
        act = Activity(noted.state, noted.source, noted.tool, noted.message, noted.turn_end)
        run.apply(ws, row.name, act, at_ms=int((noted.begun or noted.at) * 1000), via="store")
        w.state, w.tool = noted.state, noted.tool
    if w.open_tool and w.state == "working" and mono - w.open_since >= SCREEN_AFTER_S and mono >= w.next_look:
        w.next_look = mono + SCREEN_EVERY_S
        prompt_on_screen(ws, settings, row, adapter, w)


def settle(w: Watch, now: float) -> list[Noted]:
    """What of the records read so far is applied now: each turn end, and the last record (the agent's
    state now), unless that is a permission request younger than WAIT_SETTLE_S (kept for the next look)."""
    out = [n for n in w.pending[:-1] if n.turn_end]
    last = w.pending[-1:] if w.pending else []
    w.pending = []
    for n in last:
        if n.state == "waiting" and now - n.at < WAIT_SETTLE_S:
            w.pending = [n]
        else:
            out.append(n)
    return out


def prompt_on_screen(ws: Workspace, settings: Settings, row: SessionRow, adapter: AgentAdapter, w: Watch) -> None:
    """A tool call stays open: a permission prompt on the pane means the agent waits for a person."""
    from mam.panes import open_backend

    if w.backend is None:
        w.backend = open_backend(row.backend, row.server, settings=settings, ws=ws, socket=row.socket)
    assert row.pane_id is not None
    dialog = adapter.dialog(w.backend.capture(row.pane_id, lines=60))
    if dialog is None or dialog.kind != "prompt":
        return
    act = Activity("waiting", "screen", w.open_tool, f"permission prompt ({dialog.named})")
    run.apply(ws, row.name, act, at_ms=int(time.time() * 1000), via="store")
    w.state, w.tool = act.state, act.tool
