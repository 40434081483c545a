"""Whoever closes a job whose wrapper died applies its stored events first (mam/jobs/stale.py): a job
whose agent stored `completed` is recorded `completed`, even long past its deadlines; an event the
gate would refuse is not applied. And an event stored while no wrapper listens pokes the job's key
(mam/jobs/emit.py), which the next job's turn wait listens to."""

from __future__ import annotations

import socket
import subprocess

from mam.bus.envelope import Envelope
from mam.jobs.emit import ON_DISK, TO_WRAPPER, Emitter
from mam.jobs.ledger import Ledger
from mam.jobs.model import Job, JobState
from mam.jobs.record import now_ms
from mam.jobs.stale import close_if_abandoned
from mam.store import jobs as jobs_table
from mam.store.registry import Registry
from mam.util import pokes
from mam.workspace import Workspace
from tests.helpers.jobs import delivered_job_at


def dead_owner() -> str:
    """The owner string of a process that has ended."""
    proc = subprocess.Popen(["true"])
    proc.wait()
    return f"{socket.gethostname()}:{proc.pid}:0:deadbeef"


def running_job(ws: Workspace, registry: Registry) -> Ledger:
    """A running job whose heartbeat deadline passed long ago, its wrapper dead."""
    long_ago = now_ms() - 600_000
    job = delivered_job_at(
        long_ago,
        start_deadline_ms=60_000,
        heartbeat_ms=1_000,
        state=JobState.RUNNING,
        started_ms=long_ago,
        last_event_ms=long_ago,
        last_seq=1,
    )
    meta = {"target": "worker", "kind": "job", "topic_prefix": "test/stale"}
    return Ledger.register(ws, registry, job, owner=dead_owner(), meta=meta)


def store_event(registry: Registry, ledger: Ledger, seq: int, type: str, body: dict, *, key: str = "") -> None:
    env = Envelope(kind="event", job=ledger.job.id, seq=seq, type=type, sender="agent", ts=now_ms(), body=body).signed(
        key or ledger.token
    )
    with registry.write() as conn:
        jobs_table.add_event(
            conn, job_id=env.job, seq=seq, type=type, sender="agent", ts=env.ts, raw=env.encode().decode("utf-8")
        )


def test_a_stored_completed_decides_the_job_before_its_deadlines(store):
    ws, registry = store
    ledger = running_job(ws, registry)
    store_event(registry, ledger, 2, "progress", {"message": "halfway"})
    store_event(registry, ledger, 3, "completed", {"message": "all done"})
    ended = close_if_abandoned(ws, registry, ledger.job.id, by="test")
    assert ended is not None and ended.state is JobState.COMPLETED and ended.exit_code == 0
    row = registry.job(ledger.job.id)
    assert (row.state, row.reason, row.exit_code) == ("completed", "completed", 0)
    assert Job.from_dict(row.data["job"]).result == "all done"


def test_a_stored_sign_of_life_counts_and_without_one_the_deadline_closes_it(store):
    ws, registry = store
    alive, silent = running_job(ws, registry), running_job(ws, registry)
    store_event(registry, alive, 2, "progress", {"message": "halfway"})  # stored now: its deadline is ahead
    assert close_if_abandoned(ws, registry, alive.job.id, by="test") is None
    assert registry.job(alive.job.id).open
    ended = close_if_abandoned(ws, registry, silent.job.id, by="test")
    assert ended is not None and (ended.state, ended.reason) == (JobState.TIMED_OUT, "deadline_timeout")


def test_an_event_the_gate_refuses_is_not_applied(store):
    ws, registry = store
    ledger = running_job(ws, registry)
    store_event(registry, ledger, 2, "completed", {"message": "forged"}, key="0" * 64)
    ended = close_if_abandoned(ws, registry, ledger.job.id, by="test")
    assert ended is not None and ended.state is JobState.TIMED_OUT
    assert Job.from_dict(registry.job(ledger.job.id).data["job"]).result == ""


def test_an_event_no_wrapper_hears_pokes_the_jobs_key(store):
    ws, registry = store
    ledger = running_job(ws, registry)
    with pokes.Waiter(ws, [pokes.job_key(ledger.job.id)]) as outside:
        out = Emitter(ws, registry).emit(ledger.job.id, "progress", {"message": "nobody relays"})
        assert out.via == ON_DISK and outside.wait(10)


def test_an_event_the_wrapper_hears_is_left_to_it(store):
    """The one wake channel: the emitter pokes `events:<id>`; a wrapper listening there relays the event,
    so nothing is published here and nobody outside is woken for it."""
    ws, registry = store
    ledger = running_job(ws, registry)
    with (
        pokes.Waiter(ws, [pokes.events_key(ledger.job.id)]) as wrapper,
        pokes.Waiter(ws, [pokes.job_key(ledger.job.id)]) as outside,
    ):
        out = Emitter(ws, registry).emit(ledger.job.id, "progress", {"message": "to the wrapper"})
        assert out.via == TO_WRAPPER and out.warning == "" and wrapper.wait(10)
        assert not outside.wait(0)
