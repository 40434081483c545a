"""One attempt at driving one job to its end, put together from its parts.

`JobAttempt` waits for the session's turn, injects the brief once and follows the job's events
until a protocol event or a deadline ends it. What differs between a local job, the origin of a
remote job and the runner's side of one is in the parts it is given, never in subclasses:

- a `Delivery` (mam/jobs/delivery.py), made once events can arrive: where the brief goes (a pane
  here; a dispatch to a runner, supplied by mam.remote);
- an `EventSource`: how the job's events arrive (`BrokerEvents`: the broker, plus the disk path for
  a local job; `StoreEvents`: the disk path alone, on a runner, whose relay publishes them);
- a `Reporter`: who else hears that the brief was delivered or refused (nobody, or the origin of
  a runner's job).

The outcome is decided only by events and timeouts (the pure model), never by the screen.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from typing import Protocol

from mam.bus.connect import open_client
from mam.bus.envelope import EPOCH, REVOKE, Envelope
from mam.bus.mqtt import MqttClient
from mam.bus.topics import Topics
from mam.errors import BrokerError, MamError
from mam.governor.admission import Hold, Verdict
from mam.governor.gate import Governor
from mam.jobs import record as rec
from mam.jobs.delivery import Delivery, interrupt, relaunch_after_pause
from mam.jobs.intake import Intake
from mam.jobs.ledger import Ledger, TakenOver, held
from mam.jobs.model import Claim, Delivered, End, Queued, Tick, deadlines
from mam.jobs.remind import Reminder, pane_typer
from mam.jobs.result import Outcome, taken_over_outcome
from mam.jobs.stale import close_if_abandoned
from mam.jobs.usage import mark_usage, record_usage
from mam.notify import job_ended
from mam.outcomes import UNCLAIMED, Exit, JobState, Reason, ending
from mam.settings import Settings
from mam.store import jobs as jobs_table
from mam.store import pauses
from mam.store.registry import Registry
from mam.util import interrupts, pokes
from mam.workspace import Workspace

log = logging.getLogger(__name__)

# The loops below sleep until something is due (a deadline, a nudge, a reminder) or something happens
# (an MQTT message, a poke from mam.util.pokes when the job's row or the session's jobs change). Two
# things announce nothing, so they are looked at on a slow clock:
# - a wrapper killed -9 leaves the job ahead of this one open and says nothing (close_if_abandoned);
# - an event the agent wrote to the store without reaching the broker (the disk path) while this
#   wrapper's own connection is up. While the broker is down, or for a source with no broker at all
#   (a runner's job), the disk path is the only one and it is read every `poll_s`.
ABANDONED_CHECK_S = 2.0
DISK_CHECK_S = 5.0


# -- the parts ------------------------------------------------------------------------------------
class EventSource(Protocol):
    reads_store: bool  # the agent shares this workspace's store: the disk path carries its events too

    def connect(self) -> str:
        """Reach the broker: '' once connected (or nothing to connect to), else why not (the job fails:
        broker_unavailable). Touches neither the store nor the intake: it may run in another thread."""
        ...

    def open(self, intake: Intake) -> str:
        """Start listening (after `connect`); '' once events can arrive, else why not."""
        ...

    def lost(self) -> bool:
        """True while the job's only path for events is down."""
        ...

    def announced(self) -> bool:
        """True while every event also arrives as a message (the wrapper sleeps until one comes);
        False when the store is the only path (it is then read every `poll_s`)."""
        ...

    def close(self, ledger: Ledger) -> None:
        """The attempt is over: publish what others wait for (the final state) and let go."""
        ...


class Reporter(Protocol):
    def delivered(self, ledger: Ledger) -> None: ...

    def refused(self, ledger: Ledger, reason: Reason, detail: str) -> None: ...

    def failed(self, ledger: Ledger, reason: Reason, detail: str) -> None:
        """The job ended here after delivery for a reason of this attempt's (no report came: mam.jobs.remind)."""
        ...


class Nobody:
    """The reporter of a job whose only audience is its own registry."""

    def delivered(self, ledger: Ledger) -> None:
        return None

    def refused(self, ledger: Ledger, reason: Reason, detail: str) -> None:
        return None

    def failed(self, ledger: Ledger, reason: Reason, detail: str) -> None:
        return None


class BrokerEvents:
    """The job's events from the broker (and the disk path, for a local job); at the end, its retained state.

    `client`: a connected MqttClient shared between the delegations of one process (left open);
    without it this source connects and disconnects by itself."""

    def __init__(
        self, *, ws: Workspace, settings: Settings, topics: Topics, client: MqttClient | None, reads_store: bool
    ) -> None:
        self.ws, self.settings, self.topics, self.client = ws, settings, topics, client
        self.owns_client = client is None
        self.reads_store = reads_store

    def connect(self) -> str:
        try:
            if self.client is None:
                # A refused connection fails at once; a loaded broker gets time to send its CONNACK.
                self.client = open_client(self.settings, self.ws, role="wrapper", timeout=30)
            elif not self.client.connected and not self.client.wait_connected(30):
                raise BrokerError("the shared MQTT connection is down")
        except BrokerError as e:
            return str(e)
        return ""

    def open(self, intake: Intake) -> str:
        if self.client is None:
            return "not connected"
        if self.owns_client:  # losing (or getting back) the broker changes how the loop waits: wake it
            self.client.on_connection_change = lambda _up: intake.wake()
        if intake.ledger.fenced:
            revoked: set[int] = set()

            def revoke(stale: int) -> None:  # once per stale epoch: a fenced runner's every event needs no answer
                if stale not in revoked:
                    revoked.add(stale)
                    self._publish_state(intake.ledger, revoke=stale)

            intake.on_stale = revoke
        return intake.attach(self.client, self.topics.events(intake.ledger.job.id))

    def lost(self) -> bool:
        return not self.reads_store and self.client is not None and not self.client.connected

    def announced(self) -> bool:
        return self.client is not None and self.client.connected

    def close(self, ledger: Ledger) -> None:
        if self.client is None:
            return
        self._publish_state(ledger)
        if self.owns_client:
            self.client.close()
        else:  # the shared connection stays open: no UNSUBACK to wait for before a close
            self.client.unsubscribe(self.topics.events(ledger.job.id), wait=False)

    def _publish_state(self, ledger: Ledger, *, revoke: int | None = None) -> None:
        """The job's retained state, with its epoch: at the end, its final state; with `revoke`, the job as it
        is now, telling the copy of the job at that older epoch (a fenced runner) to stop."""
        job = ledger.job
        if self.client is None or not self.client.connected or not ledger.token:
            return
        body = {"state": job.state.value, "reason": job.reason, "exit_code": job.exit_code, EPOCH: ledger.epoch}
        if revoke is not None:
            body["revoked"] = revoke
        env = Envelope(
            kind="state",
            job=job.id,
            seq=job.last_seq,
            type=REVOKE if revoke is not None else "state",
            sender="wrapper",
            ts=rec.now_ms(),
            body=body,
        ).signed(ledger.token)
        # Not waited for here: the job's outcome is in the registry already, and on a connection shared
        # by many jobs a wrapper waiting for this ack held its caller up behind every other job's
        # traffic. The connection's close (this process's, or the shared one's owner's) waits for it.
        try:
            self.client.publish(self.topics.state(job.id), env.encode(), qos=1, retain=True, wait=False)
        except BrokerError as e:
            log.warning("could not publish the final state of %s: %s", job.id, e)


class StoreEvents:
    """The job's events from this workspace's store alone (a runner's job: its relay publishes them)."""

    reads_store = True

    def connect(self) -> str:
        return ""

    def open(self, intake: Intake) -> str:
        return ""

    def lost(self) -> bool:
        return False

    def announced(self) -> bool:
        return False

    def close(self, ledger: Ledger) -> None:
        return None


class _Opening:
    """`events.connect()`, in a thread of its own (`start`) or in this one (`run`); `join` gives its answer."""

    def __init__(self, events: EventSource) -> None:
        self.events = events
        self.problem: str | None = None
        self._thread: threading.Thread | None = None

    def run(self) -> None:
        try:
            self.problem = self.events.connect()
        except BaseException as e:  # never lost in the thread: the attempt ends for it
            self.problem = f"{type(e).__name__}: {e}"

    def start(self) -> None:
        self._thread = threading.Thread(target=self.run, name="mam-connect", daemon=True)
        self._thread.start()

    def join(self) -> str:
        if self._thread is not None:
            self._thread.join()
            self._thread = None
        return self.problem or ""


# -- the attempt ----------------------------------------------------------------------------------
class JobAttempt:
    """One attempt at driving one job to its end, from its parts."""

    def __init__(
        self,
        ledger: Ledger,
        *,
        registry: Registry,
        settings: Settings,
        text: str,
        delivery: Callable[[], Delivery],
        events: EventSource,
        reporter: Reporter | None = None,
        dispatch_wait_s: float | None = None,
        detach: bool = False,
        stop_at: float | None = None,
    ) -> None:
        self.ledger, self.registry, self.settings, self.text = ledger, registry, settings, text
        self.make_delivery, self.events, self.reporter = delivery, events, reporter or Nobody()
        self.dispatch_wait_s = dispatch_wait_s
        # `--detach`: let go once the brief is delivered; `stop_at` (time.monotonic()): let go then (`mam job
        # wait --timeout`). Either leaves the job open, for a later attempt to take over.
        self.detach, self.stop_at = detach, stop_at
        self.intake = Intake(ledger, registry, local=events.reads_store)
        self.poll = settings.poll_s
        self.governor = Governor(registry, settings, ledger)  # running caps and token budgets
        self.waiter: pokes.Waiter | None = None
        self._opening: _Opening | None = None
        self._slots: pokes.Waiter | None = None  # while waiting for the turn: woken by the jobs ahead, any job's end
        self._slots_keys: list[str] = []
        self.wakes = 0  # how often the follow loop woke up (a test counts an idle wrapper's)

    def run(self) -> Outcome:
        held(self.ledger.owner, True)
        try:
            job = self.ledger.job
            # Listening before the first look: a change after it pokes this FIFO, none is missed. The job's
            # one wake channel (docs/delegation.md, "Which event arrives how"): its row, its session and,
            # where the agent shares this store, the events its `mam event` commits (which then leaves
            # the relay to MQTT to this wrapper).
            keys = [pokes.job_key(job.id), pokes.session_key(job.session)]
            if self.events.reads_store:
                keys.append(pokes.events_key(job.id))
            self.waiter = pokes.Waiter(self.ledger.ws, keys)
            self._run()
        except TakenOver:
            return taken_over_outcome(self.registry, self.ledger.job.id)
        except BaseException as e:
            self._abandon(e)
            raise
        finally:
            try:
                self._wind_up()
            finally:
                # Let go (ended, detached, interrupted) last: until then this attempt's reservation is its
                # own to settle with the usage it measured, never an orphan another thread settles.
                held(self.ledger.owner, False)
        return self.outcome()

    def _wind_up(self) -> None:
        if self.waiter is not None:
            self.waiter.close()  # from here on `mam event` publishes by itself
            self.waiter = None
        if self.events.reads_store:  # the agent's CLI records are on this host
            record_usage(self.registry, self.ledger)
        self._settle_budget()
        if self.ledger.job.terminal:  # its slot and its reservation are free now: wake who is queued for them
            pokes.poke(self.ledger.ws, [pokes.ENDED])
            job_ended(self.ledger.ws, self.settings, self.ledger.job.id)  # a detached sender: never blocks
        self.events.close(self.ledger)

    def _settle_budget(self) -> None:
        try:
            self.governor.settle()
        except MamError as e:  # a dead wrapper's reservation is settled by the next admission
            log.warning("job %s: reservation not settled: %s", self.ledger.job.id, e)

    def _abandon(self, error: BaseException) -> None:
        """This attempt crashed: end the job rather than leave it open under a living process."""
        if self.ledger.job.terminal or isinstance(error, KeyboardInterrupt):
            return  # on Ctrl-C the job stays open: a retry with --job-id, or the monitor, takes it over
        try:
            self.end(Reason.WRAPPER_ERROR, f"{type(error).__name__}: {error}")
        except MamError as e:
            log.warning("job %s could not be ended after the wrapper failed: %s", self.ledger.job.id, e)

    def _run(self) -> None:
        if self.ledger.job.terminal:
            return
        # A local job's brief goes to a pane here: connecting (paho's import, the CONNECT and its
        # CONNACK) overlaps the look for the target and the turn, and is waited for before the
        # liveness check and the claim, so a brief is never injected without the broker (exit 3) and the
        # subscription stands before the agent can send anything. A remote job's dispatch needs the
        # connection first.
        opening = self._opening = _Opening(self.events)
        if self.events.reads_store and not self.events.announced():
            opening.start()
        else:  # a remote job, or a connection that is up already (the node's shared one): nothing to overlap
            opening.run()
        try:
            if not self.events.reads_store and not self._opened(opening):
                return
            delivery = self.make_delivery()  # a dispatch uses the connection
            try:
                if self.ledger.job.untyped:  # also a job paused before its brief was typed: typed once resumed
                    if not self._deliver(delivery, opening):
                        return
                elif self._caught_up() or not self._opened(opening):
                    return
                else:  # taken over after its brief was typed: the far side, if any, hears this attempt's epoch
                    delivery.rejoin(self.text, self.ledger)
                self._follow(delivery)
            finally:
                delivery.finish(self.ledger)
        finally:
            opening.join()  # never leave it connecting behind the attempt

    def _caught_up(self) -> bool:
        """A job taken over: apply the events its agent stored meanwhile, before anything else can end it
        (a broker that cannot be reached, a deadline); True if they ended it."""
        if self.events.reads_store:
            self.intake.pump(0)
        return self.ledger.job.terminal

    def _opened(self, opening: _Opening) -> bool:
        """Wait for the connection and subscribe; False if the job ended for it (broker_unavailable)."""
        problem = opening.join() or self.events.open(self.intake)
        if problem:
            self.end(Reason.BROKER_UNAVAILABLE, problem)
            return False
        return True

    def _deliver(self, delivery: Delivery, opening: _Opening) -> bool:
        try:
            problem = delivery.find_target(self._dispatch_wait())
        except BrokerError as e:  # a broker that left the look unanswered all through the wait: exit 3, recorded
            self.end(Reason.BROKER_UNAVAILABLE, str(e))
            return False
        if problem:
            self._refuse_early(Reason.TARGET_NOT_FOUND, problem)
            return False
        while True:  # until the brief is claimed; a pause (mam job pause) before the claim waits here
            if not self._unpaused() or not self._wait_turn():
                return False
            # The connection first, then the agent's liveness right before the claim and the paste: a wait
            # for the broker must never stand between the look at the agent and the paste (guarantee 9).
            if self.events.reads_store and not self._opened(opening):
                return False
            # An agent a hard pause of the job ahead stopped is relaunched first (that job ended paused).
            problem = relaunch_after_pause(delivery, self.ledger) or delivery.check_alive()
            if problem:
                self.refuse(Reason.TARGET_NOT_FOUND, problem)
                return False
            self.ledger.sync()  # the wait for the broker may have let a cancel or a pause in
            if self.ledger.job.terminal:
                return False
            if self.ledger.job.state is JobState.PAUSED or self._held():
                continue  # a pause or the workspace's hold came in meanwhile: wait again (the hold: queued)
            # No signal cuts the claim and the paste apart: an interrupt arriving meanwhile is raised once the
            # brief is typed and recorded delivered (the job is then left open, never pasted again).
            mark_usage(self.registry, self.ledger)  # the counters before the paste (hermes keeps only those)
            with interrupts.held():
                self.ledger.apply(Claim(rec.now_ms()))
                if self.ledger.job.state is not JobState.DELIVERING:  # a pause or a cancel won the commit
                    if self.ledger.job.terminal:
                        return False
                    continue
                try:
                    with self.ledger.batch():  # the paste's audit line and `delivered`: one commit
                        delivery.inject(self.text, self.ledger)
                        if not delivery.confirms_itself:
                            self.ledger.apply(Delivered(rec.now_ms()))
                except MamError as e:
                    self.refuse(Reason.INJECT_FAILED, str(e))
                    return False
                if not delivery.confirms_itself:
                    self.reporter.delivered(self.ledger)
            return True

    def _held(self) -> bool:
        """The workspace is held (`mam pause --all`), looked at right before the claim."""
        with self.registry.read() as conn:
            return pauses.hold(conn) is not None

    def _unpaused(self) -> bool:
        """While the job is paused before its brief was typed: wait for its resume (or end); False if it ended or
        this attempt lets go meanwhile."""
        while self.ledger.job.state is JobState.PAUSED:
            if self.stop_at is not None and time.monotonic() >= self.stop_at:
                return False
            self._sleep(
                ABANDONED_CHECK_S if self.stop_at is None else min(ABANDONED_CHECK_S, self.stop_at - time.monotonic())
            )
            self.ledger.sync()
        return not self.ledger.job.terminal

    def refuse(self, reason: Reason, detail: str) -> None:
        """The brief was not (or could not be) delivered: the job is cancelled (exit 5)."""
        self.reporter.refused(self.ledger, reason, detail)
        self.end(reason, detail)

    def _refuse_early(self, reason: Reason, detail: str) -> None:
        """A refusal before the claim. A broker that cannot be reached is said first (exit 3, with what is wrong
        with its settings), as when connecting came before everything else."""
        problem = self._opening.join() if self._opening is not None else ""
        if problem:
            self.end(Reason.BROKER_UNAVAILABLE, problem)
        else:
            self.refuse(reason, detail)

    def _wait_turn(self) -> bool:
        """Wait by the registry until no earlier job of the session is open; False if it ended the job."""
        try:
            return self._wait_turn_loop()
        finally:
            if self._slots is not None:
                self._slots.close()
                self._slots = None

    def _dispatch_wait(self) -> float:
        return self.settings.dispatch_wait_s if self.dispatch_wait_s is None else self.dispatch_wait_s

    def _wait_turn_loop(self) -> bool:
        wait = self._dispatch_wait()
        deadline = time.monotonic() + wait
        announced = False
        told: list[str] = []  # the jobs ahead the last look told of (a live line names the first)
        while True:
            if self.ledger.job.state is JobState.PAUSED:  # no deadline runs while paused: the wait's neither
                began = time.monotonic()
                if not self._unpaused():
                    return False
                deadline += time.monotonic() - began
                continue
            with self.registry.read() as conn:
                ahead = jobs_table.open_jobs_ahead(conn, self.ledger.job.session, self.ledger.qid)
                held = pauses.hold(conn)
            for other in ahead:
                close_if_abandoned(self.registry.ws, self.registry, other.id)
            if held is not None:  # `mam pause --all`: nothing is typed anywhere until `mam resume --all`
                verdict: Verdict | None = Verdict(False, Hold.HOLD, detail=f"the workspace is held by {held.by}")
            else:
                verdict = None if ahead else self.governor.admit()  # a running slot and a token reservation
            if verdict is not None and verdict.admitted:
                return True
            if verdict is not None and verdict.refused:
                self.refuse(Reason.BUDGET_EXHAUSTED, verdict.detail)
                return False
            if verdict is not None and verdict.hold is not None:
                self.ledger.apply(Queued(rec.now_ms(), verdict.hold.value))
            # Listening before the next look: to this job and its session, to any job's end while queued
            # for a slot or the budget, and to each job ahead (an event its agent stores while no
            # wrapper follows it pokes its key: mam.jobs.emit), so it is judged by that event at once.
            if self._listen([a.id for a in ahead], queued=verdict is not None and verdict.hold is not None):
                continue
            if ahead and not announced:
                self.ledger.note("waiting", ahead=[j.id for j in ahead])
                announced = True
            if [a.id for a in ahead] != told:
                told = [a.id for a in ahead]
                self.ledger.tell()
            if time.monotonic() >= deadline:
                if verdict is not None:
                    self._refuse_early(Reason.QUEUE_TIMEOUT, f"queued for {wait:g}s: {verdict.detail}")
                else:
                    self._refuse_early(Reason.SESSION_BUSY, f"session busy with {ahead[0].id} for {wait:g}s")
                return False
            self.ledger.sync()
            if self.ledger.job.terminal:
                return False
            # Woken when a job of the session changes state (or this one: a cancel); see ABANDONED_CHECK_S.
            self._sleep(min(deadline - time.monotonic(), ABANDONED_CHECK_S))

    def _listen(self, ahead: list[str], *, queued: bool) -> bool:
        """Wait on these keys from now on; True if they changed (look again before sleeping)."""
        job = self.ledger.job
        keys = [pokes.job_key(job.id), pokes.session_key(job.session), pokes.HOLD, *(pokes.job_key(a) for a in ahead)]
        if queued:
            keys.append(pokes.ENDED)
        if self._slots is not None and self._slots_keys == keys:
            return False
        if self._slots is not None:
            self._slots.close()
        self._slots, self._slots_keys = pokes.Waiter(self.ledger.ws, keys), keys
        return True

    def _sleep(self, seconds: float) -> None:
        waiter = self._slots or self.waiter
        if waiter is not None:
            waiter.wait(seconds)
        else:
            time.sleep(max(0.0, seconds))

    def _follow(self, delivery: Delivery) -> None:
        reminder = Reminder(self.ledger, self.settings, pane_typer(delivery), self.end_unreported)
        if self.waiter is not None:  # a poke (an event, a cancel, the monitor, a take-over) wakes the wait on the queue
            self.waiter.relay(self.intake.wake)
        paused = False
        while not self.ledger.job.terminal:
            if self._letting_go():
                break
            self.intake.pump(self._quiet_s(delivery, reminder))
            self.wakes += 1
            if self.ledger.job.terminal:
                break
            self.ledger.sync()
            if self.ledger.job.terminal:
                break
            if self.ledger.job.state is JobState.PAUSED:  # nothing is typed, nothing is due: its events still count
                reminder.paused()
                paused = True
                continue
            if paused:  # resumed: a hard pause's resume relaunched the agent in a new pane
                paused = False
                delivery.find_target()
            if self.ledger.job.state is JobState.DELIVERED or (
                self.ledger.job.state is JobState.DELIVERING and delivery.confirms_itself
            ):  # Enter again for a brief left unsubmitted; a dispatch its runner has not confirmed, sent again
                delivery.nudge(self.ledger)
            elif self.ledger.job.state is JobState.RUNNING:
                delivery.keep_heartbeat(self.ledger)
            reminder.check()  # the agent's turn ended without a report: remind it, or end the job
            if self.ledger.job.terminal:
                break
            over = self.governor.over_budget() if self.events.reads_store else ""
            if over:  # its --max-tokens: interrupt the agent's turn (never an exit), then end the job
                interrupt(delivery, self.ledger)
                self.end(Reason.TOKEN_BUDGET, over)
                break
            now = rec.now_ms()
            if self.events.lost() and any(now > d for d, _s, _r in deadlines(self.ledger.job)):
                self.end(Reason.BROKER_UNAVAILABLE, "the broker was unreachable when the job's deadline passed")
                break
            self.ledger.apply(Tick(now))
        self.intake.flush()

    def _letting_go(self) -> bool:
        """Detached and the brief delivered, or past `stop_at`: this attempt ends, the job stays open."""
        if self.detach and self.ledger.job.state not in (*UNCLAIMED, JobState.DELIVERING):
            return True
        return self.stop_at is not None and time.monotonic() >= self.stop_at

    def _quiet_s(self, delivery: Delivery, reminder: Reminder) -> float:
        """How long the follow loop may sleep if nothing arrives: until the next thing due."""
        mono = time.monotonic()
        due = [mono + (DISK_CHECK_S if self.events.announced() else self.poll)]
        if self.stop_at is not None:
            due.append(self.stop_at)
        if self.ledger.job.state is JobState.PAUSED:
            return max(0.0, min(due) - mono)
        for at in (delivery.due(self.ledger), reminder.due):
            if at is not None:
                due.append(at)
        now = rec.now_ms()
        for at_ms, _state, _reason in deadlines(self.ledger.job)[:1]:
            due.append(mono + (at_ms - now + 1) / 1000)  # a deadline passes once now > at
        return max(0.0, min(due) - mono)

    def end(self, reason: Reason, detail: str) -> None:
        """End the job for `reason`, in the state and with the exit code the table of outcomes gives it."""
        row = ending(reason)
        self.ledger.apply(
            End(at=rec.now_ms(), state=row.state, reason=row.reason, exit_code=row.exit_code, detail=detail)
        )

    def end_unreported(self, reason: Reason, detail: str) -> None:
        """The reminders ran out (mam.jobs.remind): whoever else follows the job hears it, then it ends."""
        self.reporter.failed(self.ledger, reason, detail)
        self.end(reason, detail)

    def outcome(self) -> Outcome:
        job = self.ledger.job
        code = job.exit_code if job.exit_code is not None else Exit.FAILED
        return Outcome(
            job_id=job.id,
            state=job.state.value,
            reason=job.reason,
            exit_code=code,
            detail=job.detail,
            result=job.result,
            report=job.report,
            record=self.ledger.record(),
        )
