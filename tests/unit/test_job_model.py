"""The pure job model: every rule of the delegation contract without a pane or a broker."""

from __future__ import annotations

import dataclasses
from dataclasses import replace

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from mam.jobs.model import (
    OPEN,
    TERMINAL,
    Claim,
    Delivered,
    End,
    Event,
    Job,
    JobState,
    Tick,
    advance,
    deadlines,
    input_from_dict,
    input_to_dict,
    replay,
    step,
)

JOB = Job(
    id="j",
    session="s",
    nonce="n0nce",
    created_ms=0,
    start_deadline_ms=1000,
    heartbeat_ms=100,
    heartbeat_k=4,
    budget_ms=10_000,
)


def ev(seq: int, type: str, at: int = 0, sender: str = "agent", **body):
    return Event(at=at, seq=seq, type=type, sender=sender, body=body)


def delivered(at: int = 0) -> Job:
    return advance(advance(JOB, Claim(at)), Delivered(at))


def running(at: int = 0) -> Job:
    return advance(delivered(at), ev(1, "started", at, nonce="n0nce"))


def test_happy_path() -> None:
    job = running(10)
    assert job.state is JobState.RUNNING and job.started_ms == 10
    job = advance(job, ev(2, "progress", 50, message="half"))
    job = advance(job, ev(3, "completed", 60, message="ok", report="r"))
    assert (job.state, job.exit_code, job.result, job.report) == (JobState.COMPLETED, 0, "ok", "r")


def test_started_needs_the_nonce_of_this_brief() -> None:
    job, why = step(delivered(), ev(1, "started", nonce="wrong"))
    assert why == "bad_nonce" and job.state is JobState.DELIVERED


def test_events_before_started_are_ignored() -> None:
    job, why = step(delivered(), ev(1, "completed"))
    assert why == "before_started" and job.state is JobState.DELIVERED


def test_no_started_within_the_deadline_fails_closed() -> None:
    job = delivered(0)
    assert advance(job, Tick(1000)).state is JobState.DELIVERED
    job = advance(job, Tick(1001))
    assert (job.state, job.reason, job.exit_code) == (JobState.FAILED, "agent_blocked", 1)


def test_silence_for_k_times_n_is_deadline_timeout() -> None:
    job = running(0)
    assert advance(job, Tick(400)).state is JobState.RUNNING
    job = advance(job, Tick(401))
    assert (job.reason, job.exit_code) == ("deadline_timeout", 2)


def test_heartbeats_keep_a_job_alive_until_the_budget() -> None:
    job = running(0)
    for i in range(2, 200):
        job = advance(job, ev(i, "heartbeat", at=i * 90, sender="heartbeater"))
        job = advance(job, Tick(i * 90 + 1))
        if job.terminal:
            break
    assert (job.reason, job.exit_code) == ("wall_clock_timeout", 2)


def test_started_can_declare_its_heartbeat() -> None:
    job = advance(delivered(0), ev(1, "started", nonce="n0nce", heartbeat_ms=1000))
    assert advance(job, Tick(3999)).state is JobState.RUNNING
    assert advance(job, Tick(4001)).reason == "deadline_timeout"


def test_error_fails_with_exit_1() -> None:
    job = advance(running(), ev(2, "error", reason="nope"))
    assert (job.state, job.reason, job.detail, job.exit_code) == (JobState.FAILED, "agent_error", "nope", 1)


def test_replayed_or_old_seq_is_ignored() -> None:
    job = advance(running(), ev(5, "progress"))
    assert step(job, ev(5, "completed"))[1] == "replay"
    assert step(job, ev(3, "completed"))[1] == "replay"


def test_senders_may_only_send_their_types() -> None:
    assert step(running(), ev(2, "completed", sender="heartbeater"))[1] == "sender_not_allowed"
    assert step(running(), ev(2, "completed", sender="stranger"))[1] == "sender_not_allowed"


def test_terminal_jobs_never_change() -> None:
    done = advance(running(), ev(2, "completed"))
    for inp in (ev(3, "error"), Tick(10**9), End(1, JobState.CANCELLED, "x", 5), Claim(1)):
        assert step(done, inp) == (done, "job_closed")


def test_cancel_and_busy() -> None:
    job = advance(JOB, End(5, JobState.CANCELLED, "session_busy", 5))
    assert (job.state, job.exit_code, job.ended_ms) == (JobState.CANCELLED, 5, 5)


def test_a_claim_happens_once() -> None:
    job = advance(JOB, Claim(1))
    assert step(job, Claim(2))[1] == "already_claimed"


def test_runner_delivery_and_rejection() -> None:
    job = advance(JOB, ev(1, "delivered", 3, sender="runner"))
    assert job.state is JobState.DELIVERED and job.delivered_ms == 3
    rejected = advance(JOB, ev(1, "rejected", 3, sender="runner", reason="target_not_found"))
    assert (rejected.state, rejected.reason, rejected.exit_code) == (JobState.CANCELLED, "target_not_found", 5)


def test_deadlines_are_sorted_and_empty_before_delivery() -> None:
    assert deadlines(JOB) == []
    assert [d[2] for d in deadlines(delivered(0))] == ["agent_blocked", "wall_clock_timeout"]


def test_inputs_round_trip_through_the_audit_form() -> None:
    for inp in (
        Claim(1),
        Delivered(2),
        Tick(3),
        End(4, JobState.FAILED, "r", 3, "d"),
        ev(7, "progress", 9, message="m"),
    ):
        assert input_from_dict(input_to_dict(inp)) == inp
    with pytest.raises(ValueError):
        input_from_dict({"input": "nonsense"})


# -- fuzzing: random input sequences never reach an invalid state, never crash --------------------
types = st.sampled_from(["started", "progress", "heartbeat", "completed", "error", "delivered", "rejected", "bogus"])
senders = st.sampled_from(["agent", "heartbeater", "runner", "wrapper", ""])
bodies = st.fixed_dictionaries(
    {},
    optional={
        "nonce": st.sampled_from(["n0nce", "x"]),
        "heartbeat_ms": st.integers(-5, 10_000),
        "message": st.text(max_size=5),
        "reason": st.text(max_size=5),
    },
)
inputs = st.one_of(
    st.builds(Claim, at=st.integers(0, 20_000)),
    st.builds(Delivered, at=st.integers(0, 20_000)),
    st.builds(Tick, at=st.integers(0, 50_000)),
    st.builds(
        End,
        at=st.integers(0, 20_000),
        state=st.sampled_from(sorted(TERMINAL, key=str)),
        reason=st.text(max_size=4),
        exit_code=st.integers(0, 5),
    ),
    st.builds(Event, at=st.integers(0, 20_000), seq=st.integers(-2, 40), type=types, sender=senders, body=bodies),
)


@settings(max_examples=400, deadline=None)
@given(st.lists(inputs, max_size=40))
def test_random_sequences_keep_every_invariant(seq) -> None:
    job = JOB
    for inp in seq:
        before = job
        job, _why = step(job, inp)
        assert job.state in OPEN | TERMINAL
        if before.terminal:
            assert job == before
        if job.terminal:
            assert job.exit_code is not None and job.ended_ms is not None
        else:
            assert job.exit_code is None
        assert job.last_seq >= before.last_seq
        if job.state is JobState.RUNNING:
            assert job.started_ms is not None and job.delivered_ms is not None or job.claimed_ms is not None
    assert replay(JOB, seq) == job


def test_replace_keeps_the_model_frozen() -> None:
    with pytest.raises(dataclasses.FrozenInstanceError):
        JOB.state = JobState.FAILED
    assert replace(JOB, state=JobState.FAILED).state is JobState.FAILED


def test_a_completed_event_carries_the_tasks_disposition_into_the_job() -> None:
    job = advance(running(10), ev(2, "completed", 20, message="ok", disposition="blocked", waiting_on="t-4"))
    assert (job.state, job.disposition, job.waiting_on) == (JobState.COMPLETED, "blocked", "t-4")
    plain = advance(running(10), ev(2, "completed", 20, message="ok"))
    assert (plain.disposition, plain.waiting_on) == ("", "")
    assert "disposition" in plain.as_dict() and Job.from_dict(job.as_dict()) == job
