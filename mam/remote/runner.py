"""`mam runner --name NAME`: takes remote jobs for this host's sessions over the broker.

It announces itself with a retained presence message (its last will says offline), takes
each valid dispatch once (fresh, signed with MAM_DISPATCH_SECRET, for this runner, never
seen before), clears the retained dispatch, injects the brief into its own session once,
and relays the job's events from this workspace's store to the broker in `seq` order. It
follows every runner's presence into a FleetTable (mam.remote.fleet): the node's `fleet` answer.
If the runner dies, nothing is relayed and the origin's wrapper ends by its deadlines.

Fencing (the job's epoch, MESSAGING.md "Fencing epochs"): before a job's thread may type anything,
the runner has read the job's retained state (a probe of its own comes back after it); a job that
already ended at the origin, or that the origin revoked for a newer epoch, is stopped here (`Fence`)
and types nothing. A re-dispatch at a newer epoch of a job this runner holds open moves its copy to
that epoch (its events carry it from then on) and types nothing. Restarted, the runner follows the
state of every copy it still holds open, so a copy orphaned by its restart is stopped the same way.

A copy that ended here by its own ending event (the agent's `completed` or `error`, the runner's `rejected` or
`error`) is followed until the origin's final state says the job ended there too: a subscription at QoS 0 is at most
once, so the event the broker acknowledged may never have reached the origin. Until then the runner sends that signed
event again every CONFIRM_S (asking the job's retained state again each time), for at most CONFIRM_FOR_S.
"""

from __future__ import annotations

import json
import logging
import os
import queue
import socket
import threading
import time
import uuid
from dataclasses import dataclass, field
from typing import Any

from mam.bus.connect import open_client
from mam.bus.envelope import EPOCH, REVOKE, Envelope, epoch_of
from mam.bus.mqtt import Handler, MqttClient, Will
from mam.bus.topics import Topics
from mam.errors import BrokerError, DecodeError, JobError, LockBusy, MamError
from mam.ids import check_name
from mam.jobs import record as rec
from mam.jobs.emit import Emitter, note_relayed
from mam.jobs.flood import RejectionLimiter, clip_fields
from mam.jobs.stale import end_job
from mam.outcomes import TERMINAL, Exit, JobState, Reason, Rejected, ending, origin_reason
from mam.remote.dispatch import Dispatch, check_remote_allowed
from mam.remote.fleet import FleetTable, presence
from mam.remote.runner_job import Fence, RunnerJob, brief_problem
from mam.settings import Settings
from mam.store import jobs as jobs_table
from mam.store import journal
from mam.store.registry import Registry
from mam.util.flock import FileLock, LockTimeout
from mam.util.fs import append_line
from mam.util.proc import pid_alive
from mam.workspace import Workspace

log = logging.getLogger(__name__)


PRESENCE_READ_S = 10.0  # at most this long a starting runner waits for its probe (it comes back in milliseconds)
# A runner publishes its presence again this often, live: an origin listening for PRESENCE_WAIT_S (3 s) hears it even
# when its broker answers the subscription without the retained copy (a NATS cluster with a node down: docs/broker.md).
REANNOUNCE_S = 2.0
# A copy's end the origin has not confirmed (its final state): the ending event is sent again this often, for at most
# CONFIRM_FOR_S (an origin gone for good ends the job by its own deadlines; the job's heartbeat window is 30 s by
# default, and it counts from the last event the origin heard, before this one).
CONFIRM_S = 3.0
CONFIRM_FOR_S = 30.0
ENDING_TYPES = frozenset({"completed", "error", "rejected"})  # the events that end a job at its origin


@dataclass
class Unconfirmed:
    """A copy that ended here, its end not yet heard back from the origin."""

    next_at: float  # monotonic: when its ending event is sent again
    until: float  # monotonic: when the runner stops asking
    sent: int = 0


@dataclass
class Runner:
    name: str
    ws: Workspace
    settings: Settings
    allow_insecure: bool = False
    client: MqttClient | None = None
    jobs: dict[str, threading.Thread] = field(default_factory=dict)
    taken: int = 0
    _dispatches: queue.Queue[tuple[str, bytes]] = field(default_factory=queue.Queue)
    _states: queue.Queue[tuple[str, bytes]] = field(default_factory=queue.Queue)
    _stop: threading.Event = field(default_factory=threading.Event)
    fence: Fence = field(default_factory=Fence)
    _followed: dict[str, Handler] = field(default_factory=dict)  # job -> its state handler: the jobs followed
    _unconfirmed: dict[str, Unconfirmed] = field(default_factory=dict)  # ended here, not yet at the origin
    _origin_ended: set[str] = field(default_factory=set)  # ended at the origin while this copy's thread still ran
    _probes: dict[str, threading.Event] = field(default_factory=dict)
    _probe_lock: threading.Lock = field(default_factory=threading.Lock)

    def __post_init__(self) -> None:
        check_name(self.name, "runner name")  # it names a log file, a lock and topic levels
        self.secret = check_remote_allowed(self.settings, self.ws, allow_insecure=self.allow_insecure)
        self.topics = Topics.of(self.settings, self.ws)  # presence and dispatches; job topics come with each dispatch
        self._job_topics: dict[str, Topics] = {}
        self.registry = Registry(self.ws)
        self.log_path = self.ws.state / "runners" / f"{self.name}.jsonl"
        self.log_path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        self._limiter = RejectionLimiter(self._write_note)
        self.since_ms = (
            rec.now_ms()
        )  # this life of the runner: in every presence, so a late will of an older one is told apart
        self.fleet = FleetTable(self.secret)  # every node's presence this runner's login may read (the fleet view)

    # -- lifecycle ----------------------------------------------------------------------------
    def stop(self) -> None:
        self._stop.set()

    def run(self, *, once: bool = False, max_jobs: int | None = None, idle_exit_s: float | None = None) -> int:
        """Serve until stopped; with `once`, exit when every taken job ended and nothing is queued."""

        lock = FileLock(str(self.ws.lock(f"runner-{self.name}")))
        try:
            lock.acquire(timeout=0)
        except LockTimeout as e:
            raise LockBusy(f"runner {self.name!r} already runs in workspace {self.ws.root}") from e
        try:
            self._connect()
            self._follow_held()
            self.note("started", pid=os.getpid(), host=socket.gethostname())
            idle_since = announced = time.monotonic()
            while not self._stop.is_set():
                if time.monotonic() - announced >= REANNOUNCE_S:
                    announced = time.monotonic()
                    self._announce(wait=False)  # never hold up dispatches on a slow retained write
                self._take_dispatches(max_jobs)
                self._follow_states()
                self._relay()
                self._reap()
                self._confirm()
                self._limiter.tick()
                if self.jobs or self._unconfirmed or not self._dispatches.empty():
                    idle_since = time.monotonic()
                elif once and self.taken > 0:
                    break
                elif idle_exit_s is not None and time.monotonic() - idle_since > idle_exit_s:
                    break
                self._stop.wait(self.settings.poll_s)
            self._relay()
            self._limiter.flush()
            return Exit.OK
        finally:
            self._goodbye()
            lock.release()

    def _connect(self) -> None:
        # The name check uses a connection without a last will: a runner refused (or killed) while
        # checking must never leave an 'offline' under the name of the live one.
        with open_client(
            self.settings, self.ws, role=f"runner-{self.name}-check", autostart=False, timeout=10
        ) as checker:
            self._check_name_free(checker)
        will = Will(self.topics.presence(self.name), self._presence("offline", by="will"), qos=1, retain=True)
        self.client = open_client(
            self.settings, self.ws, role=f"runner-{self.name}", will=will, autostart=False, timeout=10
        )
        self.client.on_connection_change = self._on_connection
        self._probe_topic = self.topics.probe(self.name, f"fence-{uuid.uuid4().hex[:12]}")
        self.client.subscribe(self._probe_topic, lambda _t, p, _r: self._probe_back(p))
        self.client.subscribe(self.topics.dispatch_all(self.name), lambda t, p, _r: self._dispatches.put((t, p)))
        self._announce()
        try:
            self.client.subscribe(self.topics.all_presence(), self.fleet.on_message)
        except BrokerError as e:  # kept by the client: subscribed again when the connection returns
            log.warning("the fleet's presence not followed yet: %s", e)

    def _check_name_free(self, client: MqttClient) -> None:
        """Refuse to start under a name another live runner holds on this broker (its retained
        presence says online): both would take the same dispatches and paste the brief twice."""
        seen: list[bytes] = []
        probed = threading.Event()

        def on_presence(_topic: str, payload: bytes, _retained: bool) -> None:
            if payload:
                seen.append(payload)

        # The broker sends a subscription's retained message before anything published after the
        # subscription on the same connection: once our own probe comes back, the presence under
        # this name (if any) has arrived. No guessing how long to listen.
        topic = self.topics.presence(self.name)
        probe = self.topics.probe(self.name, uuid.uuid4().hex[:12])
        client.subscribe(topic, on_presence)
        client.subscribe(probe, lambda _t, _p, _r: probed.set())
        try:
            client.publish(probe, b"probe", qos=1, timeout=PRESENCE_READ_S)
            if not probed.wait(PRESENCE_READ_S):
                log.warning(
                    "runner %s: own probe not back within %ss; checked the presence seen so far",
                    self.name,
                    PRESENCE_READ_S,
                )
        finally:
            client.unsubscribe(topic)
            client.unsubscribe(probe)
        for payload in seen:
            try:
                env = Envelope.decode(payload)
            except DecodeError:
                continue
            if env.kind != "presence" or env.type != "online" or not env.verify(self.secret):
                continue
            host, pid = str(env.body.get("host", "")), env.body.get("pid")
            if host == socket.gethostname() and isinstance(pid, int) and (pid == os.getpid() or not pid_alive(pid)):
                continue  # an earlier life of this runner on this host
            where = env.body.get("workspace") or "another workspace"
            raise LockBusy(
                f"a runner named {self.name!r} is already online on this broker (host {host}, pid {pid}, {where}); "
                "runner names must be unique per broker. If that runner is gone, the broker marks it offline "
                "within about 25 s (its keepalive)."
            )

    def _on_connection(self, up: bool) -> None:
        self.note("broker_up" if up else "broker_down")
        if up:
            threading.Thread(target=self._announce, daemon=True).start()

    def _announce(self, wait: bool = True) -> None:
        if self.client is not None and self.client.connected:
            try:
                message = self._presence("online")
                self.client.publish(self.topics.presence(self.name), message, qos=1, retain=True, wait=wait)
            except BrokerError as e:
                log.warning("presence not published: %s", e)

    def _presence(self, kind: str, by: str = "") -> bytes:
        sessions = [(r.name, r.status.value) for r in self.registry.sessions()]
        with self.registry.read() as conn:
            jobs = [row.id for row in jobs_table.open_jobs(conn)]
        return presence(
            kind,
            name=self.name,
            secret=self.secret,
            since_ms=self.since_ms,
            host=socket.gethostname(),
            pid=os.getpid(),
            workspace=str(self.ws.root),
            sessions=sessions,
            jobs=jobs,
            by=by,
        )

    def _goodbye(self) -> None:
        if self.client is not None:
            try:
                if self.client.connected:  # (a runner refused at its name check never opened this client)
                    self.client.publish(
                        self.topics.presence(self.name),
                        self._presence("offline", by="goodbye"),
                        qos=1,
                        retain=True,
                        timeout=3,
                    )
            except BrokerError:
                pass
            self.client.close()
        self.note("stopped")

    # -- dispatches ---------------------------------------------------------------------------
    def _take_dispatches(self, max_jobs: int | None) -> None:
        """Take every dispatch queued, then start their jobs once the origin's word on each was read: one probe
        for the lot (a probe per dispatch held the loop, and with it every job's relay, for seconds when 80
        dispatches came at once; at 500 sessions a `completed` reached its origin after the job's deadline)."""
        taken: list[tuple[Dispatch, RunnerJob]] = []
        for _ in range(self._dispatches.qsize()):  # those queued now: a steady flood waits for the next pass
            try:
                topic, payload = self._dispatches.get_nowait()
            except queue.Empty:
                break
            if not payload:
                continue  # a cleared retained dispatch
            if max_jobs is not None and self.taken >= max_jobs:
                self.note("rejected", reason=Rejected.MAX_JOBS, topic=topic)
                continue
            try:
                took = self._take(topic, payload)
            except (MamError, OSError) as e:  # this dispatch only: the batch taken so far still starts
                self.note("error", topic=topic, detail=f"dispatch not taken: {e}")
                continue
            if took is not None:
                taken.append(took)
        if not taken:
            return
        # Nothing is typed before the origin's word on the job is read: its retained state arrives before our probe.
        self._barrier()
        self._follow_states()
        for msg, job in taken:
            why = self.fence.why(msg.job_id)
            if why:  # a zombie: the job ended (or moved on) at the origin while this dispatch waited for us
                self.note("fenced", job=msg.job_id, epoch=msg.epoch, detail=why)
                job.drop()
                continue
            self.note("taken", job=msg.job_id, session=msg.session, epoch=msg.epoch)
            thread = threading.Thread(target=job.run, name=f"job-{msg.job_id}", daemon=True)
            self.jobs[msg.job_id] = thread
            thread.start()

    def _take(self, topic: str, payload: bytes) -> tuple[Dispatch, RunnerJob] | None:
        """Register a valid dispatch's job and follow its state (its thread starts after the probe); None if
        there is nothing to run (refused, a duplicate, a re-dispatch of a copy held here, a brief refused)."""
        freshness = int(self.settings.dispatch_freshness_s * 1000)
        try:
            msg = Dispatch.open(
                payload, secret=self.secret, runner=self.name, now_ms=rec.now_ms(), freshness_ms=freshness
            )
        except DecodeError as e:
            self.note("rejected", reason=e.reason, topic=topic, detail=str(e))
            self._clear(topic)
            return None
        held = self.registry.find_job(msg.job_id)
        if held is not None:
            if held.open and msg.epoch > held.epoch:  # a re-dispatch: the job moved on, and this copy with it
                self._move_on(msg, held.epoch)
            else:
                self.note("rejected", reason=Rejected.DUPLICATE, job=msg.job_id, topic=topic)
            self._clear(topic)
            return None
        refused = brief_problem(msg.text)
        try:
            job = RunnerJob.take(
                msg, ws=self.ws, settings=self.settings, runner=self.name, secret=self.secret, fence=self.fence
            )
        except JobError as e:  # another copy won the insert race
            self.note("rejected", reason=Rejected.DUPLICATE, job=msg.job_id, detail=str(e))
            self._clear(topic)
            return None
        self._clear(topic)
        if refused:
            # Signed by the origin, yet not something to paste: the job is registered here only so
            # the refusal reaches the origin as a signed runner `error` (relayed like any event).
            self.note("rejected", reason=Reason.BRIEF_REFUSED, job=msg.job_id, detail=refused)
            try:
                job.fail(Reason.BRIEF_REFUSED, f"the runner refused the brief: {refused}")
            except MamError as e:  # the origin then ends by its own deadlines; this runner keeps serving
                self.note("error", job=msg.job_id, detail=f"could not report the refusal: {e}")
            return None
        self.taken += 1
        self._follow(msg.job_id)
        return msg, job

    def _move_on(self, msg: Dispatch, was: int) -> None:
        """A re-dispatch of a job this runner holds open: its copy takes the new epoch (its events carry it from
        now on: the ones stored before still carry the old one, and the origin refuses them), nothing typed. What
        those said that the new attempt needs is said again at the new epoch (`_restate`)."""
        with self.registry.write() as conn:
            raised = jobs_table.raise_epoch(conn, msg.job_id, msg.epoch)
        if not raised:
            return
        try:
            journal.note(self.registry, msg.job_id, "epoch_raised", epoch=msg.epoch, previous=was, by=self.name)
        except MamError as e:
            log.warning("job %s: epoch raise not noted: %s", msg.job_id, e)
        self.fence.forget(msg.job_id)
        self.note("moved_on", job=msg.job_id, epoch=msg.epoch, previous=was)
        self._follow(msg.job_id)
        self._restate(msg.job_id)

    def _restate(self, job_id: str) -> None:
        """Say again, at the copy's new epoch, the runner's `delivered` and the agent's `started` (its nonce) that
        the copy recorded at the old one: the origin refuses those, and without them its new attempt, taken over
        before it heard them, would ignore every later event as `before_started` (at 500 sessions, 18 jobs typed
        and completed on a host that came back as its origin's node was killed ended `agent_blocked`)."""
        said = {(ev.sender, ev.type): ev for ev in self.registry.events_after(job_id)}
        emitter = Emitter(self.ws, self.registry, None)
        for sender, type in (("runner", "delivered"), ("agent", "started")):
            ev = said.get((sender, type))
            if ev is None:
                continue
            try:
                body = {k: v for k, v in Envelope.decode(ev.raw.encode("utf-8")).body.items() if k != EPOCH}
                emitter.emit(job_id, type, body, sender=sender)
                journal.note(self.registry, job_id, "restated", type=type, seq=ev.seq)
            except (MamError, OSError) as e:  # ended meanwhile (JobError), or the store failed: the deadlines hold
                log.warning("job %s: %s not said again at the new epoch: %s", job_id, type, e)
                return

    def _probe_back(self, payload: bytes) -> None:
        with self._probe_lock:
            back = self._probes.get(payload.decode("ascii", "replace"))
        if back is not None:
            back.set()

    def _barrier(self) -> None:
        """Wait until the retained messages of the subscriptions made so far have arrived: the broker sends
        them before a message published after the subscription on the same connection (our probe). A
        clustered broker may not send a retained copy at all (docs/broker.md): then a later state or revoke
        still stops the job before its brief is typed, or after."""
        if self.client is None or not self.client.connected:
            return
        tag = uuid.uuid4().hex
        back = threading.Event()
        with self._probe_lock:
            self._probes[tag] = back
        try:
            self.client.publish(self._probe_topic, tag.encode("ascii"), qos=1, timeout=PRESENCE_READ_S)
            if not back.wait(PRESENCE_READ_S):
                log.warning("runner %s: own probe not back within %ss", self.name, PRESENCE_READ_S)
        except BrokerError as e:
            log.warning("runner %s: no probe before typing: %s", self.name, e)
        finally:
            with self._probe_lock:
                self._probes.pop(tag, None)

    def _clear(self, topic: str) -> None:
        """Clear a retained dispatch, unwaited: one left behind is only a `duplicate` here later."""
        if self.client is not None and self.client.connected:
            try:
                self.client.publish(topic, b"", qos=1, retain=True, wait=False)
            except BrokerError:
                pass

    def _reap(self) -> None:
        for job_id, thread in list(self.jobs.items()):
            if thread.is_alive():
                continue
            del self.jobs[job_id]
            if self.fence.why(job_id) or job_id in self._origin_ended:
                self._origin_ended.discard(job_id)
                self._unfollow(job_id)
            else:  # ended here: followed until the origin's final state says it ended there too
                now = time.monotonic()
                self._unconfirmed[job_id] = Unconfirmed(next_at=now + CONFIRM_S, until=now + CONFIRM_FOR_S)

    def _settle(self, job_id: str) -> None:
        """The origin said the job ended (or moved on past this copy, which ended here): nothing more to send."""
        if job_id in self.jobs:
            self._origin_ended.add(job_id)  # its thread is still winding down: _reap lets it go
        else:
            wait = self._unconfirmed.pop(job_id, None)
            if wait is not None and wait.sent:
                self.note("confirmed", job=job_id, sent=wait.sent)  # heard once its ending event was sent again
            self._unfollow(job_id)

    def _confirm(self) -> None:
        """Send again the ending event of each copy whose end the origin has not confirmed, and ask the job's
        retained state again (a subscription made anew gets it): the first copy of either may have been lost."""
        now = time.monotonic()
        for job_id, wait in list(self._unconfirmed.items()):
            if now < wait.next_at:
                continue
            last = self._ending_event(job_id)
            handler = self._followed.get(job_id)
            if last is None or handler is None or now >= wait.until:
                del self._unconfirmed[job_id]
                self._unfollow(job_id)
                if last is not None and last.published:
                    self.note("unconfirmed", job=job_id, seq=last.seq, type=last.type, sent=wait.sent)
                continue
            wait.next_at = now + CONFIRM_S
            if not last.published or self.client is None or not self.client.connected:
                wait.until = now + CONFIRM_FOR_S  # its window starts once the relay could publish it
                continue
            topics = self.topics_of(job_id)
            try:
                self.client.publish(topics.events(job_id), last.raw.encode("utf-8"), qos=1, wait=False)
                self.client.subscribe(topics.state(job_id), handler, wait=False)
            except BrokerError as e:
                log.warning("job %s: ending event not sent again: %s", job_id, e)
                continue
            wait.sent += 1
            try:
                journal.note(self.registry, job_id, "ending_resent", seq=last.seq, type=last.type, sent=wait.sent)
            except MamError as e:
                log.warning("job %s: re-send not noted: %s", job_id, e)

    def _ending_event(self, job_id: str) -> jobs_table.EventRow | None:
        """The event that ended this copy, if one did (not a deadline, nor a fence): the last of the ending types
        (a heartbeat or an activity may be stored after it, before the copy's thread closed the row)."""
        return next((ev for ev in reversed(self.registry.events_after(job_id)) if ev.type in ENDING_TYPES), None)

    def topics_of(self, job_id: str) -> Topics:
        """The job's topics, under the prefix its origin sent in the dispatch (kept in the job record)."""
        if job_id not in self._job_topics:
            try:
                prefix = str(rec.read_record(self.ws, job_id).get("topic_prefix") or "")
            except JobError:
                prefix = ""
            self._job_topics[job_id] = Topics(prefix or self.topics.prefix, self.topics.runners_prefix)
        return self._job_topics[job_id]

    def _follow(self, job_id: str) -> None:
        """Listen for the origin's word on a job this runner holds (its retained state: the final one, or a revoke)."""

        def on_state(_topic: str, payload: bytes, _retained: bool) -> None:
            self._states.put((job_id, payload))

        if self.client is not None and job_id not in self._followed:
            self._followed[job_id] = on_state
            try:
                self.client.subscribe(self.topics_of(job_id).state(job_id), on_state)
            except BrokerError as e:  # kept by the client: subscribed again when the connection returns
                log.warning("state of %s not followed yet: %s", job_id, e)

    def _unfollow(self, job_id: str) -> None:
        if self._followed.pop(job_id, None) is not None:
            if self.client is not None:
                self.client.unsubscribe(self.topics_of(job_id).state(job_id))
        self._job_topics.pop(job_id, None)

    def _follow_held(self) -> None:
        """The copies this runner still holds open (a restart left them without their thread): follow their
        state too, so one that ended or moved on at the origin is stopped here."""
        with self.registry.read() as conn:
            rows = jobs_table.open_jobs(conn)
        for row in rows:
            meta = row.data.get("meta", {})
            if meta.get("relay") == "runner" and meta.get("runner") == self.name:
                self._follow(row.id)

    # -- the origin's word on a job: its retained final state, or a revoke ----------------------
    def _follow_states(self) -> None:
        while True:
            try:
                job_id, payload = self._states.get_nowait()
            except queue.Empty:
                return
            if not payload or job_id not in self._followed:
                continue
            try:
                env = Envelope.decode(payload)
                token = str(rec.read_record(self.ws, job_id).get("token", ""))
                said = epoch_of(env)
            except (DecodeError, JobError):
                continue
            row = self.registry.find_job(job_id)
            if env.kind != "state" or env.job != job_id or not env.verify(token) or row is None:
                continue
            if said < row.epoch:
                continue  # an older attempt of the origin's: this copy moved on past it
            state = str(env.body.get("state", ""))
            ended = state in {s.value for s in JobState} and JobState(state) in TERMINAL
            if not row.open:  # this copy ended here: the origin's word confirms it (or the job moved on past it)
                if ended or (env.type == REVOKE and said > row.epoch):
                    self._settle(job_id)
                continue
            if env.type == REVOKE:
                if said > row.epoch:
                    self._stop_copy(job_id, f"revoked by the origin: the job is at epoch {said}, this copy {row.epoch}")
            elif ended:
                self._stop_copy(
                    job_id,
                    f"ended at the origin: {state} ({env.body.get('reason', state)})",
                    JobState(state),
                    origin_reason(str(env.body.get("reason", state))),
                    env.body.get("exit_code"),
                )

    def _stop_copy(
        self, job_id: str, why: str, state: JobState | None = None, reason: str = "", code: object = None
    ) -> None:
        """Fence the job here (nothing typed for it from now on), then end this copy: as the origin ended it,
        or `revoked`. Never reported to the origin."""
        self.fence.stop(job_id, why)
        if state is None:
            revoked = ending(Reason.REVOKED)
            state, reason, code = revoked.state, revoked.reason, revoked.exit_code
            self.note("revoked", job=job_id, detail=why)
        code = code if isinstance(code, int) else Exit.FAILED
        end_job(self.ws, self.registry, job_id, state, reason, code, why, by=f"runner {self.name}")
        if job_id not in self.jobs:  # a copy without its thread (a restart orphaned it): nothing else follows it
            self._unconfirmed.pop(job_id, None)
            self._unfollow(job_id)

    # -- relay --------------------------------------------------------------------------------
    def _relay(self) -> None:
        """Publish every event this workspace recorded but did not publish, per job in seq order."""
        if self.client is None or not self.client.connected:
            return
        with self.registry.read() as conn:
            pending = jobs_table.unpublished(conn)
        for ev in pending:
            try:
                self.client.publish(
                    self.topics_of(ev.job_id).events(ev.job_id), ev.raw.encode("utf-8"), qos=1, timeout=5
                )
            except BrokerError:
                return
            with self.registry.write() as conn:
                note_relayed(conn, ev.job_id, ev.seq)

    def note(self, kind: str, **fields: Any) -> None:
        if kind == "rejected" and not self._limiter.allow(str(fields.get("reason", ""))):
            return  # counted; summarised in one line when the second ends
        self._write_note(kind, clip_fields(fields))

    def _write_note(self, kind: str, fields: dict[str, Any]) -> None:
        line = json.dumps(
            {"ts_ms": rec.now_ms(), "runner": self.name, "kind": kind, **fields}, sort_keys=True, default=str
        )
        append_line(self.log_path, line)
        if "job" in fields and kind == "rejected":
            try:
                journal.note(
                    self.registry,
                    str(fields["job"]),
                    "dispatch_rejected",
                    **{k: v for k, v in fields.items() if k != "job"},
                )
            except (OSError, MamError):
                pass
        log.info("%s %s", kind, fields)
