"""Pausing and resuming a job, and the workspace's hold (`mam pause --all`).

A pause is recorded in the job's own row (state `paused`, through the store's one commit, so the job's
attempt adopts it at its next look: mam/jobs/attempt.py types nothing into a paused job's session and the
model runs no deadline for it) and in `job_pauses` (its mode, since when, who asked). Then the mode acts on
the agent, once, here:

- `safe`: nothing; the agent finishes its turn (its events still count: a `completed` ends the job);
- `quick`: the CLI's interrupt keys, now (never an exit; the conversation stays);
- `hard`: as quick, then the agent is stopped as `mam session stop` stops it (its conversation id kept), the job
  noted on the session's row (`stopped_by_pause`): if the job ends paused, the session's next job relaunches
  the agent at its turn (mam.jobs.delivery.relaunch_after_pause).

Pauses only escalate (safe -> quick -> hard). Resume: a job paused before its brief was typed waits for its
turn again (its attempt types the brief); otherwise the agent is relaunched with its conversation if it is
not running, and one short resume brief is typed (the job id, a new nonce, the footer), after which the job
needs a fresh `started` within the start deadline. The hold is the registry's too (mam/store/pauses.py):
until `mam resume --all`, no brief is typed anywhere in the workspace (a new delegation waits `queued` with
`queued_for: hold`, routines do not fire, loops start no round).
"""

from __future__ import annotations

import secrets
import time
from collections.abc import Callable, Mapping
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from mam.agents import get_adapter
from mam.errors import JobError, MamError, UsageError
from mam.ids import check_job_id
from mam.jobs import record as rec
from mam.jobs.brief import TASK_KIND, resume_brief
from mam.jobs.delivery import PaneDelivery
from mam.jobs.ledger import Ledger
from mam.jobs.model import Job, Pause, Resume
from mam.jobs.queries import status
from mam.jobs.stale import cancel, change_outside
from mam.jobs.target import parse_target
from mam.notify import send
from mam.outcomes import UNCLAIMED, Exit, JobState
from mam.sessions import audit
from mam.sessions.common import backend_for
from mam.sessions.resume import resume_session
from mam.sessions.stop import press, stop_session
from mam.settings import Settings
from mam.store import jobs as jobs_table
from mam.store import journal, pauses
from mam.store.pauses import PauseRow
from mam.store.registry import Registry
from mam.store.sessions import LIVE
from mam.util import pokes
from mam.workspace import Workspace

MODES = ("safe", "quick", "hard")
RELEASE_CHECK_S = 5.0  # a hold's waiter looks again this often though a release pokes it
RESUME_WORKERS = 8  # `mam resume --all` resumes at most this many jobs at once
PASTE_WAIT_S = 30.0  # a quick or hard pause waits at most this for a paste under way to end before its keys
# A TUI tells a lone Escape from the start of an escape sequence by the quiet after it (the demo agent waits 50 ms,
# terminals' escape timeouts run to a few hundred): a cancel's interrupt keys are followed by this much quiet
# before the job ends and the session's next brief may be pasted (not a wait for an outcome).
INTERRUPT_QUIET_S = 0.3


class PauseRefused(JobError):
    """The job is not in a state that allows it (ended, not paused, remote), or its agent could not be reached."""

    exit_code: int = Exit.REFUSED


def check_mode(mode: str) -> str:
    if mode not in MODES:
        raise UsageError(f"--mode must be one of {', '.join(MODES)}, not {mode!r}")
    return mode


# -- one job --------------------------------------------------------------------------------------
def pause_job(
    ws: Workspace, settings: Settings, registry: Registry, job_id: str, *, mode: str = "safe", by: str | None = None
) -> dict[str, Any]:
    """Pause an open job in `mode` (or escalate its pause); the job's status, with `paused`."""
    check_job_id(job_id)
    check_mode(mode)
    who = audit.check_by(by)
    row = _open_local(registry, job_id)
    # The mode's row is decided and written in one transaction: two pauses at once (a click and `pause --all`)
    # keep the higher mode, and neither drops the other's.
    with registry.write() as conn:
        found = jobs_table.find(conn, job_id)
        existing = pauses.get(conn, job_id)
        current = existing if found is not None and found.state == JobState.PAUSED else None
        if current is not None and MODES.index(mode) < MODES.index(current.mode):
            raise UsageError(
                f"job {job_id} is paused in {current.mode} mode; a pause only escalates (safe -> quick -> hard)",
                job_id=job_id,
            )
        unchanged = current is not None and current.mode == mode
        since = current.since_ms if current is not None else rec.now_ms()
        if not unchanged and (existing is None or current is None or MODES.index(mode) > MODES.index(existing.mode)):
            pauses.put(conn, job_id, PauseRow(mode, since, who))  # before the row says paused: its mode is found
    if unchanged:
        return status(registry, job_id)
    job = Job.from_dict(row.data.get("job", {}))
    if current is None:
        paused = change_outside(ws, registry, job_id, lambda _j, now: Pause(now), by=who, said={"mode": mode})
        if paused is None:  # ended meanwhile, or paused by another at the same moment
            again = registry.job(job_id)
            if not again.open:
                with registry.write() as conn:
                    pauses.drop(conn, job_id)
                _refuse_closed(registry, job_id)
            paused = Job.from_dict(again.data.get("job", {}))
        job = paused
    else:
        registry_note(registry, job_id, "pause_escalated", mode=mode, was=current.mode, by=who)
    if mode != "safe" and job.paused_from == JobState.DELIVERING:
        job = _pasted(registry, job)  # its brief is being pasted: keys pressed now would land in the paste
    if mode != "safe" and JobState(job.paused_from or job.state) not in UNCLAIMED:
        try:
            _act(ws, settings, registry, job, mode, by=who)
        except MamError as e:  # the agent's pane is gone (or will not answer): the pause holds all the same
            registry_note(registry, job_id, "pause_act_failed", mode=mode, note=str(e), by=who)
    _notify(ws, settings, "paused", job_id, row.session, mode=mode, by=who, since=since)
    return status(registry, job_id)


def resume_job(
    ws: Workspace,
    settings: Settings,
    registry: Registry,
    job_id: str,
    *,
    by: str | None = None,
    environ: Mapping[str, str],
) -> dict[str, Any]:
    """Resume a paused job; its status."""
    check_job_id(job_id)
    who = audit.check_by(by)
    row = _open_local(registry, job_id)
    if row.state != JobState.PAUSED:
        raise PauseRefused(f"job {job_id} is not paused (it is {row.state})", job_id=job_id)
    held = hold(registry)
    if held is not None:  # nothing is typed anywhere while held: `mam resume --all` releases it, then resumes
        raise PauseRefused(
            f"job {job_id} stays paused: the workspace is held (mam pause --all by {held.by}); release it with "
            "`mam resume --all`",
            job_id=job_id,
        )
    job = Job.from_dict(row.data.get("job", {}))
    if job.paused_from == JobState.DELIVERING:  # paused while its brief was pasted: that paste ends first
        job = _pasted(registry, job)
    with registry.read() as conn:
        mode = (pauses.get(conn, job_id) or PauseRow("safe", 0, "")).mode
    if job.untyped:
        if change_outside(ws, registry, job_id, lambda _j, now: Resume(now, job.nonce), by=who) is None:
            _refuse_unpaused(registry, job_id)
    else:
        delivery = _relaunched(ws, settings, registry, job, environ)
        ledger = Ledger(ws, registry, job, row.owner, dict(row.data.get("meta", {})))
        delivery.ready(ledger)  # before the resume is committed: a pause meanwhile finds it still paused
        nonce = secrets.token_hex(8)
        resumed = change_outside(ws, registry, job_id, lambda _j, now: Resume(now, nonce), by=who)
        if resumed is None:
            _refuse_unpaused(registry, job_id)
        assert resumed is not None
        ledger.job = resumed
        try:
            task = ledger.meta.get("kind") == TASK_KIND  # a task's run: its footer says how to report a disposition
            text = resume_brief(job_id, nonce, resumed.heartbeat_ms / 1000, task=task)
            delivery.inject(text, ledger, noted="resume_injected")
        except MamError as e:  # nothing typed: it is paused again, as it was
            change_outside(ws, registry, job_id, lambda _j, now: Pause(now), by=who, said={"mode": mode})
            raise PauseRefused(f"job {job_id} stays paused: the resume brief was not typed: {e}", job_id=job_id) from e
    with registry.write() as conn:
        pauses.drop(conn, job_id)
    _notify(ws, settings, "resumed", job_id, row.session, mode=mode, by=who, since=rec.now_ms())
    return status(registry, job_id)


def cancel_job(
    ws: Workspace, settings: Settings, registry: Registry, job_id: str, *, interrupt: bool = True
) -> dict[str, Any]:
    """`mam job cancel`: first the agent's turn on the job is interrupted with its CLI's interrupt keys (as a
    quick pause does; never an exit, the conversation stays), then the job ends cancelled, so the session's
    next job is typed into an agent that stopped working on this one. `interrupt=False`: the job only ends
    (the agent finishes its turn; the next brief waits in the CLI's input until then).

    Nothing is pressed for a job whose brief was never typed, whose agent is known idle (its hooks said so),
    that a quick or hard pause interrupted already, or that runs on another host."""
    check_job_id(job_id)
    row = registry.job(job_id)  # JobNotFound (exit 5)
    if interrupt and row.open and not (row.data.get("meta", {}).get("runner") or parse_target(row.target).remote):
        job = Job.from_dict(row.data.get("job", {}))
        if JobState.DELIVERING in (job.state, job.paused_from):
            job = _pasted(registry, job)  # keys pressed during the paste would land in it
        with registry.read() as conn:
            paused = pauses.get(conn, job_id) if job.state == JobState.PAUSED else None
        if (
            not (job.untyped or job.terminal)
            and job.activity not in ("idle", "ended")
            and (paused is None or paused.mode == "safe")
        ):
            try:
                _act(ws, settings, registry, job, "quick", by="cancel")
                time.sleep(INTERRUPT_QUIET_S)
            except MamError as e:  # the pane is gone or will not answer: the job is cancelled all the same
                registry_note(registry, job_id, "interrupt_failed", note=str(e), by="cancel")
    return cancel(ws, registry, job_id)


def registry_note(registry: Registry, job_id: str, kind: str, **fields: Any) -> None:
    """An audit line on a job from outside its attempt."""
    journal.commit(registry, journal.Transition(job_id, lines=[(kind, fields)]))


def _open_local(registry: Registry, job_id: str) -> jobs_table.JobRow:
    row = registry.job(job_id)  # JobNotFound (exit 5)
    if not row.open:
        _refuse_closed(registry, job_id)
    if row.data.get("meta", {}).get("runner") or parse_target(row.target).remote:
        raise PauseRefused(
            f"job {job_id} runs on another host ({row.target}): pause and resume it there, where its session is",
            job_id=job_id,
        )
    return row


def _refuse_unpaused(registry: Registry, job_id: str) -> None:
    """A resume that lost a race: the job ended, or another resume came first."""
    row = registry.job(job_id)
    if not row.open:
        _refuse_closed(registry, job_id)
    raise PauseRefused(f"job {job_id} is not paused (it is {row.state}): another resume came first", job_id=job_id)


def _refuse_closed(registry: Registry, job_id: str) -> None:
    row = registry.job(job_id)
    raise PauseRefused(f"job {job_id} already ended: {row.state} ({row.reason})", job_id=job_id)


def _pasted(registry: Registry, job: Job) -> Job:
    """The job once the paste under way when it was paused is over (its attempt records it delivered), or as it
    is after PASTE_WAIT_S."""

    def done() -> Job | None:
        row = registry.find_job(job.id)
        now = Job.from_dict(row.data.get("job", {})) if row is not None else job
        return now if now.paused_from != JobState.DELIVERING or now.terminal else None

    deadline = time.monotonic() + PASTE_WAIT_S
    with pokes.Waiter(registry.ws, [pokes.job_key(job.id)]) as waiter:  # the attempt's commit pokes it
        while True:
            now = done()
            left = deadline - time.monotonic()
            if now is not None or left <= 0:
                return now or job
            waiter.wait(left)


def _act(ws: Workspace, settings: Settings, registry: Registry, job: Job, mode: str, *, by: str) -> None:
    """`quick`: the interrupt keys; `hard`: those, then the agent stopped with its conversation kept."""
    session = registry.find_session(job.session)
    if session is None or session.status not in LIVE or not session.pane_id:
        return  # no agent to act on: the pause holds by itself
    keys = get_adapter(session.agent).interrupt_keys
    press(backend_for(session, settings=settings, ws=ws), session.pane_id, keys)
    registry_note(registry, job.id, "interrupted", pane=session.pane_id, keys=[v for _k, v in keys], by=by)
    if mode == "hard":
        stopped = stop_session(session.name, ws=ws, settings=settings, registry=registry, paused_job=job.id)
        registry_note(
            registry, job.id, "agent_stopped", session=session.name, conversation=stopped.conversation_id, by=by
        )


def _relaunched(
    ws: Workspace, settings: Settings, registry: Registry, job: Job, environ: Mapping[str, str]
) -> PaneDelivery:
    """The job's pane, its agent relaunched with its conversation first if it is not running (a hard pause
    stopped it, or it died while paused)."""
    delivery = PaneDelivery(parse_target(job.session), ws=ws, settings=settings, registry=registry)
    if not (delivery.find_target() or delivery.check_alive()):
        return delivery
    session = registry.find_session(job.session)
    if session is None or not session.conversation_id:
        raise PauseRefused(f"job {job.id} stays paused: session {job.session!r} has no agent or conversation to resume")
    try:
        resume_session(job.session, ws=ws, settings=settings, registry=registry, environ=environ)
    except MamError as e:
        raise PauseRefused(f"job {job.id} stays paused: its agent could not be relaunched: {e}") from e
    problem = delivery.find_target() or delivery.check_alive()
    if problem:
        raise PauseRefused(f"job {job.id} stays paused: {problem}", job_id=job.id)
    return delivery


def _notify(ws: Workspace, settings: Settings, kind: str, job_id: str, session: str, **fields: Any) -> None:
    payload = {"job": job_id, "session": session, "state": kind, "mode": fields["mode"], "by": fields["by"]}
    send(ws, settings, kind=kind, subject=f"{job_id}:{fields['since']}", payload=payload)


# -- the workspace's hold ---------------------------------------------------------------------------
def hold(registry: Registry) -> PauseRow | None:
    with registry.read() as conn:
        return pauses.hold(conn)


def wait_released(ws: Workspace, registry: Registry, on_hold: Callable[[PauseRow], None]) -> None:
    """Return once the workspace is not held; `on_hold(hold)` is called once if it was (a loop's round waits)."""
    told = False
    with pokes.Waiter(ws, [pokes.HOLD]) as waiter:
        while (held := hold(registry)) is not None:
            if not told:
                on_hold(held)
                told = True
            waiter.wait(RELEASE_CHECK_S)


def pause_all(
    ws: Workspace, settings: Settings, registry: Registry, *, mode: str = "safe", by: str | None = None
) -> dict[str, Any]:
    """Hold the workspace and pause every open job in `mode` (an already paused one escalates to it, never
    back). Returns {hold, paused: [ids], skipped: [{id, why}]}."""
    check_mode(mode)
    who = audit.check_by(by)
    with registry.write() as conn:
        held = pauses.hold(conn)
        if held is None or MODES.index(mode) > MODES.index(held.mode):
            held = PauseRow(mode, held.since_ms if held is not None else rec.now_ms(), who)
            pauses.set_hold(conn, held)
    audit.append(ws, "hold", session="", by=who, mode=mode)
    pokes.poke(ws, [pokes.HOLD])
    paused, skipped = [], []
    with registry.read() as conn:
        rows = jobs_table.open_jobs(conn)
        current = pauses.of(conn, [r.id for r in rows])
    for row in rows:
        was = current.get(row.id) if row.state == JobState.PAUSED else None
        if was is not None and MODES.index(was.mode) >= MODES.index(mode):
            paused.append(row.id)
            continue
        try:
            pause_job(ws, settings, registry, row.id, mode=mode, by=who)
            paused.append(row.id)
        except MamError as e:
            skipped.append({"id": row.id, "why": str(e)})
    _notify(ws, settings, "hold", "", "", mode=mode, by=who, since=held.since_ms)
    return {"hold": held.as_dict(), "paused": paused, "skipped": skipped}


def resume_all(
    ws: Workspace, settings: Settings, registry: Registry, *, by: str | None = None, environ: Mapping[str, str]
) -> dict[str, Any]:
    """Release the hold and resume every paused job. Returns {released, resumed: [ids], failed: [{id, why}]}."""
    who = audit.check_by(by)
    with registry.write() as conn:
        released = pauses.hold(conn) is not None
        pauses.set_hold(conn, None)
    if released:
        audit.append(ws, "release", session="", by=who)
    pokes.poke(ws, [pokes.HOLD])
    with registry.read() as conn:
        ids = [r.id for r in jobs_table.open_jobs(conn) if r.state == JobState.PAUSED]

    def resume_one(job_id: str) -> str:
        """'' once resumed, else why not. A hard pause's resume waits for the relaunched agent to be ready,
        so the jobs (each of its own session) are resumed side by side, each with its own registry."""
        own = Registry(ws)
        try:
            resume_job(ws, settings, own, job_id, by=who, environ=environ)
            return ""
        except MamError as e:
            return str(e)
        finally:
            own.close()

    with ThreadPoolExecutor(max_workers=max(1, min(RESUME_WORKERS, len(ids))), thread_name_prefix="mam-resume") as pool:
        whys = list(pool.map(resume_one, ids))
    resumed = [job_id for job_id, why in zip(ids, whys) if not why]
    failed = [{"id": job_id, "why": why} for job_id, why in zip(ids, whys) if why]
    return {"released": released, "resumed": resumed, "failed": failed}
