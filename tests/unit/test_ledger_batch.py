"""Ledger.batch(): a burst of inputs committed once, with the same audit lines in the same order,
and the same answers to a cancel or a take-over as inputs committed one by one."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from mam.bus.envelope import Envelope
from mam.jobs import record as rec
from mam.jobs.intake import Intake
from mam.jobs.ledger import Ledger, TakenOver, new_owner
from mam.jobs.model import Event, Job, JobState, Pause, Resume
from mam.jobs.stale import change_outside, end_job
from mam.store import jobs as jobs_table
from mam.store.registry import Registry
from mam.workspace import Workspace
from tests.helpers.jobs import replayed_state


@pytest.fixture
def ledger(tmp_path: Path) -> Iterator[Ledger]:
    ws = Workspace(tmp_path / "ws")
    ws.root.mkdir()
    registry = Registry(ws)
    job = Job(
        id="job-0123456789abcdef",
        session="s",
        nonce="n" * 16,
        created_ms=1,
        start_deadline_ms=60_000,
        heartbeat_ms=60_000,
        heartbeat_k=4,
        budget_ms=3_600_000,
        state=JobState.RUNNING,
        claimed_ms=1,
        delivered_ms=1,
        started_ms=1,
    )
    yield Ledger.register(
        ws, registry, job, owner=new_owner(), meta={"target": "s", "kind": "job", "topic_prefix": "t"}
    )
    registry.close()


def progress(seq: int) -> Event:
    return Event(at=1000 + seq, seq=seq, type="progress", sender="agent", body={"message": f"step {seq}"})


def commits(ledger: Ledger) -> list[str]:
    """Kinds of the audit lines after `created`."""
    return [line["kind"] for line in rec.read_audit(ledger.ws, ledger.job.id)][1:]


def test_a_batch_commits_once_at_the_end_with_every_line_in_order(ledger: Ledger) -> None:
    seen: list[int] = []
    ledger.on_commit = lambda job, _inp: seen.append(job.last_seq)
    with ledger.batch():
        assert ledger.apply(progress(1)) == ""
        ledger.note("rejected", reason="bad_signature")
        assert ledger.apply(progress(2)) == ""
        assert ledger.apply(progress(2)) == "replay"
        assert ledger.job.last_seq == 2
        assert ledger.registry.job(ledger.job.id).data["job"]["last_seq"] == 0  # nothing committed yet
        assert commits(ledger) == []
    assert ledger.registry.job(ledger.job.id).data["job"]["last_seq"] == 2
    assert "last_seq" not in rec.read_record(ledger.ws, ledger.job.id)  # a counter: in the registry only
    assert commits(ledger) == ["input", "rejected", "input"]
    assert seen == [1, 2]
    assert replayed_state(ledger.ws, ledger.job.id) == ledger.job


def test_the_live_record_is_rewritten_on_state_changes_only_and_holds_no_counters(ledger: Ledger) -> None:
    path = ledger.ws.job_record(ledger.job.id)
    written = path.stat().st_ino  # every rewrite is atomic: a new file
    ledger.apply(progress(1))
    ledger.sync()  # the wrapper's loop
    assert ledger.registry.job(ledger.job.id).data["job"]["last_seq"] == 1  # the row, the truth, has it
    assert path.stat().st_ino == written  # same state: the record is not rewritten
    assert oct(path.stat().st_mode & 0o777) == "0o600"
    ledger.apply(Event(at=2000, seq=2, type="completed", sender="agent", body={}))
    assert path.stat().st_ino != written
    record = rec.read_record(ledger.ws, ledger.job.id)
    assert record["state"] == "completed" and record["token"] == ledger.token
    assert "last_seq" not in record and "last_event_ms" not in record
    assert record["topic_prefix"] == "t" and record["owner"] == ledger.owner


def test_outside_a_batch_each_input_commits_at_once(ledger: Ledger) -> None:
    ledger.apply(progress(1))
    assert ledger.registry.job(ledger.job.id).data["job"]["last_seq"] == 1
    ledger.note("seq_gap", missing=1)
    assert commits(ledger) == ["input", "seq_gap"]


def test_a_cancel_during_a_batch_wins_and_the_held_inputs_are_not_logged(ledger: Ledger) -> None:
    with ledger.batch():
        ledger.apply(progress(1))
        ledger.note("rejected", reason="replay")
        end_job(ledger.ws, ledger.registry, ledger.job.id, JobState.CANCELLED, "cancelled_by_user", 5, by="cancel")
    assert ledger.job.state is JobState.CANCELLED
    assert commits(ledger) == ["input", "rejected"]  # the cancel's own input line, then what the batch saw
    assert replayed_state(ledger.ws, ledger.job.id).state is JobState.CANCELLED


def test_a_take_over_during_a_batch_raises_when_it_commits(ledger: Ledger) -> None:
    with pytest.raises(TakenOver):
        with ledger.batch():
            ledger.apply(progress(1))
            with ledger.registry.write() as conn:
                jobs_table.update(conn, ledger.job.id, owner="someone-else")
    assert ledger.job.last_seq == 0


def test_a_taken_over_attempt_never_writes_its_stale_record_over_the_new_owners(ledger: Ledger) -> None:
    ledger.apply(progress(1))
    ledger.apply(progress(2))
    new = Ledger.take_over(ledger.ws, ledger.registry, ledger.job.id)
    new.apply(Event(at=3000, seq=3, type="completed", sender="agent", body={}))
    with pytest.raises(TakenOver):
        ledger.sync()
    record = rec.read_record(ledger.ws, ledger.job.id)
    assert record["state"] == "completed" and record["owner"] == new.owner


def test_intake_takes_a_burst_in_one_batch_and_stops_at_the_end(ledger: Ledger) -> None:
    intake = Intake(ledger, ledger.registry, local=False)

    def wire(seq: int, type: str = "progress") -> bytes:
        return (
            Envelope("event", ledger.job.id, seq, type, "agent", 1000 + seq, {"message": "m"})
            .signed(ledger.token)
            .encode()
        )

    for raw in (wire(1), wire(1), b"junk", wire(3), wire(4, "completed"), wire(5)):
        intake.feed(raw)
    intake.pump(0)
    assert ledger.job.state is JobState.COMPLETED and ledger.job.last_seq == 4
    # seq 1 twice on one path is a replay; seq 5 came after the end and is left alone.
    assert commits(ledger) == ["input", "rejected", "rejected", "seq_gap", "input", "input"]
    assert [e.seq for e in ledger.registry.events_after(ledger.job.id)] == [1, 3, 4]
    row = ledger.registry.job(ledger.job.id)
    assert (row.state, replayed_state(ledger.ws, ledger.job.id).state.value) == ("completed", "completed")


def started(seq: int, nonce: str) -> Event:
    return Event(at=1000 + seq, seq=seq, type="started", sender="agent", body={"nonce": nonce})


def completed(seq: int) -> Event:
    return Event(at=1000 + seq, seq=seq, type="completed", sender="agent", body={"message": "done"})


def paused_then_resumed_outside(ledger: Ledger, nonce: str) -> None:
    """The job paused from outside (`mam job pause`), seen by the attempt, then resumed from outside (`mam job
    resume`, a new nonce) while the attempt still holds it paused: its next look has not come yet."""
    change_outside(ledger.ws, ledger.registry, ledger.job.id, lambda _j, now: Pause(now), by="tester")
    ledger.sync()
    assert ledger.job.state is JobState.PAUSED
    change_outside(ledger.ws, ledger.registry, ledger.job.id, lambda _j, now: Resume(now, nonce), by="tester")
    assert ledger.registry.job(ledger.job.id).state == JobState.DELIVERED


def test_events_taken_while_a_resume_from_outside_is_not_seen_yet_count_once_it_is(ledger: Ledger) -> None:
    """A hard pause's resume types a resume brief; the relaunched agent's `started` (the new nonce) and
    `completed` can reach the attempt before its next look at the row: read against the paused job it holds, the
    `started` is ignored (already started, as it was when paused), the `completed` would end it, and that commit
    is refused (the row moved on). Both are applied again to the job as its row now is: it completes."""
    paused_then_resumed_outside(ledger, "r" * 16)
    with ledger.batch():
        ledger.apply(started(1, "r" * 16))
        ledger.apply(completed(2))
    assert ledger.registry.job(ledger.job.id).state == JobState.COMPLETED
    assert ledger.job.state is JobState.COMPLETED
    assert replayed_state(ledger.ws, ledger.job.id) == ledger.job


def test_an_event_ignored_against_a_job_the_row_has_left_behind_is_applied_again(ledger: Ledger) -> None:
    """The same with the `started` alone in its batch: nothing was committed, so no refused commit tells the
    attempt its job is stale; the batch looks at the row once an input was ignored."""
    paused_then_resumed_outside(ledger, "r" * 16)
    with ledger.batch():
        assert ledger.apply(started(1, "r" * 16)) == "already_started"
    assert ledger.job.state is JobState.RUNNING
    assert ledger.registry.job(ledger.job.id).state == JobState.RUNNING
    with ledger.batch():
        ledger.apply(completed(2))
    assert ledger.registry.job(ledger.job.id).state == JobState.COMPLETED
    assert replayed_state(ledger.ws, ledger.job.id) == ledger.job
