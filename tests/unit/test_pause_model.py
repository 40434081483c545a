"""The job model's pause and resume (mam/jobs/model.py): no deadline runs while paused, the job's own events
still count, a resume restarts the start deadline in full and the budget keeps what was left."""

from __future__ import annotations

from mam.jobs.model import (
    Claim,
    Delivered,
    End,
    Event,
    Job,
    JobState,
    Pause,
    Resume,
    Tick,
    deadlines,
    input_from_dict,
    input_to_dict,
    step,
)
from mam.outcomes import Ignored
from tests.unit.test_job_model import JOB


def ev(at: int, seq: int, kind: str, **body: object) -> Event:
    return Event(at=at, seq=seq, type=kind, sender="agent", body=body)


def running(at: int = 100) -> Job:
    job = step(step(JOB, Claim(0))[0], Delivered(10))[0]
    return step(job, ev(at, 1, "started", nonce="n0nce"))[0]


def test_no_deadline_runs_while_paused_and_its_events_still_count() -> None:
    paused, why = step(running(), Pause(200))
    assert not why and paused.state is JobState.PAUSED and paused.paused_from == "running"
    assert deadlines(paused) == []
    assert step(paused, Tick(1_000_000))[1] == Ignored.PAUSED  # far past every deadline: still paused
    assert step(paused, Claim(300))[1] == Ignored.PAUSED
    beat, why = step(paused, ev(300, 2, "progress", message="x"))
    assert not why and beat.state is JobState.PAUSED and beat.last_event_ms == 300
    done, _ = step(beat, ev(400, 3, "completed", message="ok"))
    assert done.state is JobState.COMPLETED and done.paused_from == ""  # a turn the pause let finish ends it


def test_resume_of_a_typed_job_needs_a_fresh_started_with_the_new_nonce() -> None:
    paused = step(running(), Pause(200))[0]
    assert step(paused, Pause(250))[1] == Ignored.NO_CHANGE  # an escalation changes the mode row, not the job
    resumed, why = step(paused, Resume(5_200, "n3w"))
    assert not why and resumed.state is JobState.DELIVERED and resumed.nonce == "n3w"
    assert resumed.paused_total_ms == 5_000
    by_reason = {reason: at for at, _state, reason in deadlines(resumed)}
    assert by_reason["agent_blocked"] == 5_200 + 1000  # the start deadline, in full from the resume
    assert by_reason["wall_clock_timeout"] == 10 + 10_000 + 5_000  # the budget did not run while paused
    assert step(resumed, ev(5_300, 2, "started", nonce="n0nce"))[1] == Ignored.BAD_NONCE
    again, _ = step(resumed, ev(5_300, 2, "started", nonce="n3w"))
    assert again.state is JobState.RUNNING
    assert step(running(), Resume(300, "x"))[1] == Ignored.NOT_PAUSED


def test_a_job_paused_before_its_brief_goes_back_to_its_turn_and_its_budget_is_untouched() -> None:
    paused = step(JOB, Pause(50))[0]
    assert paused.untyped and not running().untyped
    resumed = step(paused, Resume(7_000, "n3w"))[0]
    assert resumed.state is JobState.PENDING and resumed.nonce == "n0nce"  # its own brief, never typed yet
    assert resumed.paused_total_ms == 0  # the budget runs from delivery: the wait before it is no part of it


def test_a_paste_under_way_when_paused_is_recorded_and_an_end_ends_it() -> None:
    claimed = step(JOB, Claim(0))[0]
    paused = step(claimed, Pause(5))[0]
    assert paused.paused_from == "delivering" and not paused.untyped
    delivered, why = step(paused, Delivered(20))
    assert not why and delivered.state is JobState.PAUSED and delivered.paused_from == "delivered"
    cancelled, _ = step(delivered, End(30, JobState.CANCELLED, "cancelled_by_user", 5))
    assert cancelled.state is JobState.CANCELLED and cancelled.exit_code == 5


def test_pause_and_resume_inputs_round_trip_through_the_audit_log() -> None:
    for inp in (Pause(5), Resume(6, "abc")):
        assert input_from_dict(input_to_dict(inp)) == inp


def test_an_event_its_attempt_commits_as_a_pause_lands_is_applied_not_lost(store) -> None:  # type: ignore[no-untyped-def]
    """The attempt's commit loses the compare-and-set to a pause from outside: the event is applied again to the
    paused job (a `completed` then ends it), never dropped."""
    from mam.jobs.ledger import Ledger, new_job_id, new_owner
    from mam.jobs.stale import change_outside

    ws, registry = store
    job = Job(**{**running().as_dict(), "id": new_job_id(), "state": JobState.RUNNING})
    ledger = Ledger.register(ws, registry, job, owner=new_owner(), meta={"target": "s", "kind": "job"})
    assert change_outside(ws, registry, job.id, lambda _j, now: Pause(now), by="t") is not None
    assert ledger.job.state is JobState.RUNNING  # the attempt has not looked yet
    assert ledger.apply(ev(500, 2, "completed", message="done")) == ""
    row = registry.job(job.id)
    assert row.state == "completed" and ledger.job.state is JobState.COMPLETED
