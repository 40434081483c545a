"""Getting a brief to its agent: into a local pane (here), or to a runner on another host (remote).

A Delivery finds the target, checks the agent still runs, injects the brief exactly once, and
may press Enter again while the brief sits unsubmitted. It never decides a job's outcome.
"""

from __future__ import annotations

import hashlib
import os
import subprocess
import time
from collections.abc import Callable
from typing import Protocol

from mam.agents import get_adapter
from mam.agents.base import AgentAdapter
from mam.agents.channel import Sent
from mam.agents.ready import check_no_dialog, wait_ready
from mam.errors import AgentDialog, JobError, MamError
from mam.jobs import heartbeat
from mam.jobs.activity import body_of
from mam.jobs.emit import Emitter
from mam.jobs.ledger import Ledger
from mam.jobs.target import Target
from mam.notify import session_terminated
from mam.outcomes import JobState
from mam.panes.base import PaneBackend
from mam.sessions.common import backend_for
from mam.sessions.resume import resume_session
from mam.sessions.stop import press
from mam.settings import Settings
from mam.store.registry import Registry
from mam.store.sessions import LIVE, SessionRow, SessionStatus
from mam.util.poll import Timeout, wait_for
from mam.util.proc import pid_alive
from mam.workspace import Workspace

MAX_NUDGES = 5
# How long a paste may take to show in the input box of a CLI with an `enter_gap_s`, looked at this often.
PASTE_SHOWS_S = 2.0
SHOWS_POLL_S = 0.02
# A sandboxed agent's heartbeater (see AgentAdapter.reaps_tool_processes) is started again at most
# this many times per job, looked at no more often than every HEARTBEAT_CHECK_S seconds.
MAX_HEARTBEAT_RESTARTS = 3
HEARTBEAT_CHECK_S = 1.0


def before_enter(
    backend: PaneBackend, pane: str, adapter: AgentAdapter, screen: str, shown: Callable[[str], bool]
) -> str:
    """The screen to look at before the Enter that submits a paste. For a CLI that takes an Enter right after other
    input as a newline (its `enter_gap_s`), first wait until the paste shows (`shown`, at most PASTE_SHOWS_S: the
    CLI has read it), then that gap, and look again; for any other CLI, `screen` as it is."""
    if not adapter.enter_gap_s:
        return screen
    if not shown(screen):
        try:
            wait_for(lambda: shown(backend.capture(pane, lines=200)), timeout=PASTE_SHOWS_S, interval=SHOWS_POLL_S)
        except Timeout:
            pass  # pressed all the same: a brief left unsubmitted gets the nudge
    time.sleep(adapter.enter_gap_s)
    return backend.capture(pane, lines=200)


class Delivery(Protocol):
    confirms_itself: bool  # True: a `delivered` event from the other side marks delivery

    def find_target(self, wait_s: float = 0.0) -> str:
        """'' if the target exists, else why not. A target that is away and may come back (a remote node that
        said it is offline) is waited for up to `wait_s`."""
        ...

    def check_alive(self) -> str:
        """'' if the agent runs, else why not (and the session is marked terminated)."""
        ...

    def inject(self, text: str, ledger: Ledger) -> None: ...

    def rejoin(self, text: str, ledger: Ledger) -> None:
        """The job was taken over after its brief was typed: tell the far side the attempt's epoch (a remote job:
        a re-dispatch, which never types the brief twice); a pane here: nothing to tell."""
        ...

    def nudge(self, ledger: Ledger) -> None:
        """When due: a pane, while the job is `delivered`, gets Enter again for a brief left unsubmitted; a delivery
        that confirms itself (a remote job, `delivering` until its runner's `delivered`) sends its dispatch again."""
        ...

    def keep_heartbeat(self, ledger: Ledger) -> None:
        """While the job runs: start the heartbeater again if the agent's sandbox killed it."""
        ...

    def due(self, ledger: Ledger) -> float | None:
        """When (time.monotonic) `nudge` or `keep_heartbeat` next has something to look at; None: never."""
        ...

    def finish(self, ledger: Ledger) -> None:
        """Clean up after the job ended (or the attempt stopped)."""
        ...


class PaneDelivery:
    confirms_itself = False

    def __init__(self, target: Target, *, ws: Workspace, settings: Settings, registry: Registry) -> None:
        self.target, self.ws, self.settings, self.registry = target, ws, settings, registry
        self.row: SessionRow | None = None
        self._nudges = 0
        self._next_nudge: float | None = None
        self._heartbeater: subprocess.Popen[bytes] | None = None
        self._hb_restarts = 0
        self._next_hb_check = 0.0
        self._reaps: bool | None = None  # the agent's CLI kills what its tool commands leave behind
        self._looked_up = False  # the session's row looked up for a job taken over (once)
        self._dialog_told = False  # a dialog on the screen was recorded as the job's `waiting`

    def find_target(self, wait_s: float = 0.0) -> str:
        """A local session is there or not: nothing to wait for. One whose agent a hard pause stopped is there:
        its job's turn relaunches it (`relaunch_after_pause`)."""
        row = self.registry.find_session(self.target.session)
        if row is None:
            return f"no session named {self.target.session!r} in this workspace"
        if self.target.backend and row.backend != self.target.backend:
            return f"session {row.name!r} runs on {row.backend}, not {self.target.backend}"
        if row.status not in LIVE and not _stopped_by_pause(row):
            return f"session {row.name!r} is {row.status}" + (
                " (resume it first)" if row.status == SessionStatus.STOPPED else ""
            )
        self.row = row
        return ""

    def check_alive(self) -> str:
        row = self.registry.find_session(self.target.session)
        if row is None or row.status not in LIVE:
            return self.find_target() or f"session {self.target.session!r} is gone"
        self.row = row
        backend = backend_for(row, settings=self.settings, ws=self.ws)
        info = backend.pane(row.pane_id) if row.pane_id else None
        problem = ""
        if info is None:
            problem = f"the pane {row.pane_id} of session {row.name!r} is gone"
        elif info.dead:
            problem = f"the agent of session {row.name!r} exited (pane {row.pane_id} is dead)"
        elif row.pane_pid and info.pid and info.pid != row.pane_pid:
            problem = f"pane {row.pane_id} runs another process (pid {info.pid}, expected {row.pane_pid})"
        elif info.pid and not pid_alive(info.pid):
            problem = f"the agent process {info.pid} of session {row.name!r} is not running"
        if problem:
            self.registry.update_session(
                row.name, status=SessionStatus.TERMINATED, note=f"agent not running: {problem}"
            )
            session_terminated(self.ws, self.settings, row.name, f"agent not running: {problem}")
        return problem

    def ready(self, ledger: Ledger) -> None:
        """Wait (once per launch, at most T or 30 s) for the agent's screen to show it takes input; past that,
        note `not_ready` (the paste goes ahead anyway)."""
        assert self.row is not None and self.row.pane_id
        row = self.row
        if row.ready:  # readiness is established once per launch (a resume that timed out waiting included)
            return
        backend = backend_for(row, settings=self.settings, ws=self.ws)
        adapter = get_adapter(row.agent)

        def loading() -> bool:
            return adapter.replay_pending(row.conversation_id, env=row.agent_env, since=row.launched_at or 0.0)

        timeout = min(ledger.job.start_deadline_ms / 1000, 30.0)
        if wait_ready(backend, row.pane_id or "", adapter, timeout=timeout, loading=loading):
            self.row = self.registry.update_session(row.name, ready_at=time.time())
        else:
            ledger.note("not_ready", pane=row.pane_id, note="the agent never showed it was ready; pasting anyway")

    def inject(self, text: str, ledger: Ledger, *, noted: str = "injected") -> None:
        """Paste `text` once (after the agent shows it is ready, never into a dialog) and press Enter; audit line
        `noted` (a resume brief: `resume_injected`, so `injected` stays the brief's own, once)."""
        self.ready(ledger)
        assert self.row is not None and self.row.pane_id
        backend = backend_for(self.row, settings=self.settings, ws=self.ws)
        adapter = get_adapter(self.row.agent)
        row = self.row
        # Never type into a dialog or a permission prompt: look right before the paste and the Enter.
        try:
            check_no_dialog(adapter, backend.capture(self.row.pane_id, lines=200), self.row.pane_id)
        except AgentDialog as e:
            raise AgentDialog(f"{e}: `mam session attach {row.name}`", **e.context) from None
        via = self._through_channel(text, ledger)
        if not via:
            after = backend.paste_and_capture(self.row.pane_id, text, lines=200)
            nonce = ledger.job.nonce
            after = before_enter(backend, self.row.pane_id, adapter, after, lambda s: adapter.input_pending(s, nonce))
            try:
                check_no_dialog(adapter, after, self.row.pane_id)
            except AgentDialog as e:  # pasted but not submitted: a nudge submits it once the dialog is answered
                ledger.note("enter_withheld", pane=self.row.pane_id, note=str(e))
            else:
                backend.send_keys(self.row.pane_id, "Enter")
        data = text.encode("utf-8")
        ledger.note(
            noted,
            pane=self.row.pane_id,
            bytes=len(data),
            sha256=hashlib.sha256(data).hexdigest(),
            via=via or "paste",
        )
        step = min(max(ledger.job.start_deadline_ms / 8000, 0.5), 10.0)
        self._step = step
        self._next_nudge = time.monotonic() + step

    def _through_channel(self, text: str, ledger: Ledger) -> str:
        """Start the agent's turn through its CLI's own channel when the session's launch opened one
        (opencode: mam.agents.opencode_server, codex: mam.agents.codex_server): "channel" when it went
        that way, "" to paste instead (no channel, or one that took nothing: noted as
        `channel_unavailable`). A prompt sent that got no answer counts as delivered: pasting after it
        could type the brief twice; a brief that was lost is caught by the start deadline, as a lost
        paste is."""
        row = self.row
        assert row is not None
        adapter = get_adapter(row.agent)
        outcome = adapter.deliver_through_channel(self.ws.session_dir(row.name), text, row.conversation_id, row.cwd)
        if outcome is None:
            return ""
        if outcome.sent is Sent.UNAVAILABLE:
            ledger.note("channel_unavailable", pane=row.pane_id, note=outcome.why)
            return ""
        if outcome.conversation_id and outcome.conversation_id != row.conversation_id:
            self.row = self.registry.update_session(row.name, conversation_id=outcome.conversation_id)
        if outcome.sent is Sent.UNKNOWN:
            ledger.note("channel_no_answer", pane=row.pane_id, note=outcome.why)
        return "channel"

    def rejoin(self, text: str, ledger: Ledger) -> None:
        return None  # the pane is this host's: no copy of the job anywhere else

    def type_idle(self, text: str) -> str:
        """Paste `text` and press Enter, only when the agent's input box is empty and no dialog shows: the
        one way a text other than the brief is typed (a reminder, `mam job send`). Returns '' when typed,
        else why nothing was. Once pasted it is never pasted again: a dialog that shows meanwhile holds
        back only the Enter."""
        if self.row is None and (why := self.find_target()):
            return why
        row = self.row
        if row is None or not row.pane_id:
            return f"session {self.target.session!r} has no pane"
        backend = backend_for(row, settings=self.settings, ws=self.ws)
        adapter = get_adapter(row.agent)
        screen = backend.capture(row.pane_id, lines=200)
        shown = adapter.dialog(screen)
        if shown is not None:
            return (
                f"{row.agent} shows a dialog or permission prompt ({shown.named!r}) in pane {row.pane_id}: "
                f"a person must answer it (`mam session attach {row.name}`)"
            )
        if not adapter.input_empty(screen):
            return f"the input box of {row.agent} in pane {row.pane_id} is not empty"
        backend.paste(row.pane_id, text)
        screen = before_enter(
            backend, row.pane_id, adapter, backend.capture(row.pane_id, lines=200), lambda s: not adapter.input_empty(s)
        )
        if adapter.dialog(screen) is None:
            backend.send_keys(row.pane_id, "Enter")
        return ""

    def finish(self, ledger: Ledger) -> None:
        """Stop the heartbeater this delivery started (the job is over: nothing is left running)."""
        proc, self._heartbeater = self._heartbeater, None
        if proc is None:
            return
        if proc.poll() is None:
            proc.terminate()
            try:
                proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()

    def due(self, ledger: Ledger) -> float | None:
        state = ledger.job.state
        if (
            state is JobState.DELIVERED
            and self._next_nudge is not None
            and (self._nudges < MAX_NUDGES or not self._dialog_told)
        ):
            return self._next_nudge
        if state is JobState.RUNNING and self._watches_heartbeater():
            return self._next_hb_check
        return None

    def _watches_heartbeater(self) -> bool:
        if self.row is None and not self._looked_up:  # a job taken over: never delivered by this attempt
            self._looked_up = True
            self.row = self.registry.find_session(self.target.session)
        row = self.row
        if row is None or self._hb_restarts >= MAX_HEARTBEAT_RESTARTS:
            return False
        if self._reaps is None:
            self._reaps = get_adapter(row.agent).reaps_tool_processes(row.permissions)
        return True

    def keep_heartbeat(self, ledger: Ledger) -> None:
        """Start the heartbeater again when it was killed: by the agent's CLI (a sandbox that reaps what
        a tool command leaves behind), or with the node that ran it as a thread (this attempt took the
        job over in the next node). Only while the agent process lives, and only if the heartbeater did
        not stop by itself (it removes heartbeat.pid when it does)."""
        row, job = self.row, ledger.job
        if row is None or not self._watches_heartbeater() or time.monotonic() < self._next_hb_check:
            return
        self._next_hb_check = time.monotonic() + (HEARTBEAT_CHECK_S if self._reaps else job.heartbeat_ms / 1000)
        if self._heartbeater is not None:
            self._heartbeater.poll()  # reap it if it ended
        found = heartbeat.recorded(self.ws, job.id)
        if found is None or heartbeat.is_running(self.ws, job.id) or not pid_alive(row.pane_pid):
            return
        self._hb_restarts += 1
        interval = job.heartbeat_ms / 1000
        self._heartbeater = heartbeat.begin(
            self.ws,
            job.id,
            interval,
            int(row.pane_pid or 0),
            python=self.settings.agent_python_bin,
            environ=self.settings.as_environ(),
        )
        ledger.note(
            "heartbeat_restarted",
            pid=self._heartbeater.pid if self._heartbeater is not None else os.getpid(),
            gone=found[0],
            interval_s=interval,
            count=self._hb_restarts,
            agent=row.agent,
        )

    def nudge(self, ledger: Ledger) -> None:
        """Press Enter again if the brief still sits unsubmitted in the input box (never paste again);
        a dialog or prompt on the screen instead is told once, as the job's `waiting` (its detail if
        the start deadline passes)."""
        if (
            self.row is None
            or self._next_nudge is None
            or (self._nudges >= MAX_NUDGES and self._dialog_told)
            or time.monotonic() < self._next_nudge
        ):
            return
        self._next_nudge = time.monotonic() + self._step
        backend = backend_for(self.row, settings=self.settings, ws=self.ws)
        screen = backend.capture(self.row.pane_id or "", lines=60)
        adapter = get_adapter(self.row.agent)
        shown = adapter.dialog(screen)
        if shown is not None:  # never press Enter on a dialog or a permission prompt: say it is there
            if not self._dialog_told and not (ledger.job.waiting or {}).get("tool"):
                self._dialog_told = True
                self._tell_dialog(ledger, shown.named)
            return
        if self._nudges >= MAX_NUDGES:
            return
        if adapter.input_pending(screen, ledger.job.nonce):
            self._nudges += 1
            backend.send_keys(self.row.pane_id or "", "Enter")
            ledger.note("nudge", pane=self.row.pane_id, count=self._nudges)

    def _tell_dialog(self, ledger: Ledger, marker: str) -> None:
        """Record `waiting` (as a hook would: an `activity` event) naming what the screen shows."""
        assert self.row is not None
        message = (
            f"{self.row.agent} shows a dialog or prompt ({marker.strip()!r}) in pane {self.row.pane_id}; "
            f"answer it with `mam session attach {self.row.name}`"
        )
        ledger.note("dialog", pane=self.row.pane_id, shows=marker)
        try:
            Emitter(self.ws, self.registry, None).emit(
                ledger.job.id, "activity", body_of("waiting", source="screen", message=message)
            )
        except JobError:
            pass  # the job ended meanwhile


def _stopped_by_pause(row: SessionRow) -> bool:
    return row.status == SessionStatus.STOPPED and bool(row.stopped_by_pause)


def relaunch_after_pause(delivery: Delivery, ledger: Ledger) -> str:
    """At a job's turn, right before the look at its agent: relaunch with its conversation the agent a hard pause
    of an earlier job stopped (that job ended paused: cancelled, timed out, taken over; nobody resumed it), so the
    brief goes to a running agent. '' when there was nothing to do or it runs now, else why not (a local pane
    only: a runner relaunches its own)."""
    if not isinstance(delivery, PaneDelivery):
        return ""
    row = delivery.registry.find_session(delivery.target.session)
    if row is None or not _stopped_by_pause(row):
        return ""
    try:
        now = resume_session(
            row.name, ws=delivery.ws, settings=delivery.settings, registry=delivery.registry, environ=os.environ
        )
    except MamError as e:
        again = delivery.registry.find_session(row.name)
        if again is not None and again.status == SessionStatus.RUNNING:  # a person relaunched it meanwhile
            return ""
        return f"session {row.name!r} (stopped by the hard pause of {row.stopped_by_pause}) was not relaunched: {e}"
    delivery.row = now
    ledger.note("agent_relaunched", session=row.name, paused_job=row.stopped_by_pause, pane=now.pane_id)
    return ""


def interrupt(delivery: Delivery, ledger: Ledger) -> None:
    """Stop the agent's turn under way with its CLI's interrupt keys (a local pane only; never an exit)."""
    if not isinstance(delivery, PaneDelivery) or delivery.row is None or not delivery.row.pane_id:
        return
    row = delivery.row
    keys = get_adapter(row.agent).interrupt_keys
    press(backend_for(row, settings=delivery.settings, ws=delivery.ws), delivery.row.pane_id, keys)
    ledger.note("interrupted", pane=row.pane_id, keys=[value for _kind, value in keys])
