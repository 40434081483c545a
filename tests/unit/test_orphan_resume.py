"""The monitor's follower of orphaned jobs (mam/monitor/jobs.py) takes each job as its row is at every pass,
never as the last pass left it: a pause and a resume from another process between two passes (the fault
suite's #101) must not leave the job open for ever, nor its agent's fresh `started` refused for the old nonce."""

from __future__ import annotations

from mam.jobs.ledger import Ledger, held
from mam.jobs.model import Job, Pause, Resume
from mam.jobs.record import now_ms
from mam.jobs.stale import change_outside
from mam.monitor.jobs import OrphanFollower
from mam.store.registry import Registry
from mam.workspace import Workspace
from tests.helpers.jobs import delivered_job_at
from tests.unit.test_stale_events import dead_owner, store_event


def delivered_job(ws: Workspace, registry: Registry, *, at: int) -> Ledger:
    """A job delivered at `at` (ms) whose agent has not started yet, its wrapper dead."""
    job = delivered_job_at(at, start_deadline_ms=60_000, heartbeat_ms=1_000)
    meta = {"target": "worker", "kind": "job", "topic_prefix": "test/orphan"}
    return Ledger.register(ws, registry, job, owner=dead_owner(), meta=meta)


def pause(ws: Workspace, registry: Registry, job_id: str, at: int) -> None:
    assert change_outside(ws, registry, job_id, lambda _j, _now: Pause(at), by="other") is not None


def resume(ws: Workspace, registry: Registry, job_id: str, at: int, nonce: str) -> None:
    assert change_outside(ws, registry, job_id, lambda _j, _now: Resume(at, nonce), by="other") is not None


def test_a_job_resumed_after_a_pass_saw_it_paused_is_ended_by_its_start_deadline(store):
    ws, registry = store
    long_ago = now_ms() - 900_000
    ledger = delivered_job(ws, registry, at=long_ago)
    follower = OrphanFollower(ws, registry)
    pause(ws, registry, ledger.job.id, long_ago + 1_000)
    assert follower.step() == []  # follows it, paused: no deadline runs
    assert follower.wants(ledger.job.id)
    resume(ws, registry, ledger.job.id, long_ago + 100_000, "n3w")  # by another process, between two passes
    assert registry.job(ledger.job.id).state == "delivered"
    repairs = follower.step()  # the start deadline ran out long ago (60 s from the resume)
    row = registry.job(ledger.job.id)
    assert (row.state, row.reason) == ("failed", "agent_blocked"), repairs
    assert [job_id for job_id, _what in repairs] == [ledger.job.id]


def test_a_pause_and_a_resume_between_two_passes_take_the_new_nonce(store):
    ws, registry = store
    now = now_ms()
    ledger = delivered_job(ws, registry, at=now)
    follower = OrphanFollower(ws, registry)
    assert follower.step() == []  # follows it, delivered
    pause(ws, registry, ledger.job.id, now + 10)
    resume(ws, registry, ledger.job.id, now + 20, "n3w")  # delivered again, as the last pass saw it
    store_event(registry, ledger, 1, "started", {"nonce": "n3w"})
    follower.step()
    row = registry.job(ledger.job.id)
    assert row.state == "running", Job.from_dict(row.data["job"])
    assert Job.from_dict(row.data["job"]).nonce == "n3w"


def test_a_job_taken_over_by_an_attempt_that_died_too_is_followed_under_its_new_owner(store):
    ws, registry = store
    now = now_ms()
    ledger = delivered_job(ws, registry, at=now)
    follower = OrphanFollower(ws, registry)
    assert follower.step() == []
    second = Ledger.take_over(ws, registry, ledger.job.id)
    held(second.owner, False)  # that attempt is gone as well
    store_event(registry, ledger, 1, "started", {"nonce": "n0nce"})
    repairs = follower.step()
    assert registry.job(ledger.job.id).state == "running", repairs
    assert not any("could not follow" in what for _id, what in repairs)
