"""Fencing epochs (issue 24, item 3), without a broker: the store column, the take-over that raises it, the
dispatch and the runner's events that carry it, the origin's gate and intake that refuse an older one, and the
runner's copy that stops, typing nothing, once the origin revokes it or ended the job."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from mam.bus.envelope import Envelope
from mam.jobs import ledger as ledger_module
from mam.jobs import record as rec
from mam.jobs.emit import Emitter
from mam.jobs.gate import EventGate
from mam.jobs.intake import Intake
from mam.jobs.ledger import Ledger, TakenOver, new_owner
from mam.jobs.model import JobState
from mam.jobs.target import Target
from mam.outcomes import Reason, Rejected
from mam.remote.dispatch import Dispatch
from mam.remote.runner import Runner
from mam.remote.runner_job import Fence, FencedDelivery, RunnerJob, ToOrigin
from mam.settings import load_settings
from mam.store import db
from mam.store.registry import Registry
from mam.workspace import Workspace
from tests.helpers.jobs import delivered_job_at, register_delivered

SECRET = "a-dispatch-secret-for-the-epoch-tests"
TOKEN = "ab" * 32


def remote_ledger(ws: Workspace, registry: Registry) -> Ledger:
    """The origin's side of a `remote:rb/d1` job, running (the runner's `started` applied)."""
    now = rec.now_ms()
    job = delivered_job_at(now, session="rb/d1", state=JobState.RUNNING, started_ms=now, last_seq=2)
    meta = {"target": "remote:rb/d1", "kind": "job", "topic_prefix": "mam/t", "runner": "rb"}
    return Ledger.register(ws, registry, job, owner=new_owner(), meta=meta, token=TOKEN)


def event(job_id: str, seq: int, type: str = "progress", *, epoch: object = None, sender: str = "agent") -> bytes:
    body: dict[str, object] = {"message": "m"} if type == "progress" else {}
    if type == "completed":
        body = {"message": "done"}
    if epoch is not None:
        body["epoch"] = epoch
    env = Envelope(kind="event", job=job_id, seq=seq, type=type, sender=sender, ts=rec.now_ms(), body=body)
    return env.signed(TOKEN).encode()


def audit_kinds(registry: Registry, job_id: str) -> list[str]:
    with registry.read() as conn:
        return [str(r[0]) for r in conn.execute("SELECT kind FROM job_audit WHERE job_id=? ORDER BY n", (job_id,))]


# -- the store and the take-over ------------------------------------------------------------------------------
def test_the_migration_adds_the_epoch_column_and_old_rows_read_epoch_0(tmp_path: Path) -> None:
    path = tmp_path / "old.db"
    conn = sqlite3.connect(path)
    before = next(i for i, m in enumerate(db.MIGRATIONS) if any("ADD COLUMN epoch" in s for s in m))
    for statements in db.MIGRATIONS[:before]:  # a registry made by the mam before epochs
        for statement in statements:
            conn.execute(statement)
    conn.execute(f"PRAGMA user_version={before}")
    conn.execute(
        "INSERT INTO jobs(id, session, kind, target, state, owner, data, created_at, updated_at) "
        "VALUES ('job-old', 's', 'job', 's', 'running', 'o', '{}', 0, 0)"
    )
    conn.commit()
    conn.close()
    database = db.Database(path)
    try:
        with database.transaction() as c:
            assert c.execute("SELECT epoch FROM jobs WHERE id='job-old'").fetchone()[0] == 0
    finally:
        database.close()


def test_each_take_over_raises_the_epoch_by_one_and_says_so_in_the_audit(store: tuple[Workspace, Registry]) -> None:
    ws, registry = store
    ledger = register_delivered(ws, registry, topic_prefix="mam/t")
    assert ledger.epoch == 0 and registry.job(ledger.job.id).epoch == 0
    first = Ledger.take_over(ws, registry, ledger.job.id)
    second = Ledger.take_over(ws, registry, ledger.job.id)
    assert (first.epoch, second.epoch, registry.job(ledger.job.id).epoch) == (1, 2, 2)
    with registry.read() as conn:
        lines = conn.execute(
            "SELECT line FROM job_audit WHERE job_id=? AND kind IN ('taken_over', 'followed') ORDER BY n",
            (ledger.job.id,),
        ).fetchall()
    assert ['"epoch": 1' in r[0] for r in lines] == [True, False]


def test_a_take_over_that_lost_the_race_writes_nothing_and_raises(
    store: tuple[Workspace, Registry], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Two waits in one node find a job unowned at once (a `--detach`ed job's follower and a `mam job wait`):
    the second take-over is a compare-and-set on the owner it saw, so it fails, writes no line and holds
    nothing."""
    ws, registry = store
    ledger = register_delivered(ws, registry, topic_prefix="mam/t")
    stale = registry.job(ledger.job.id)  # what the second wait read before the first took the job
    first = Ledger.take_over(ws, registry, ledger.job.id)
    held_before = set(ledger_module._HELD)
    monkeypatch.setattr(registry, "job", lambda job_id: stale)
    with pytest.raises(TakenOver):
        Ledger.take_over(ws, registry, ledger.job.id)
    monkeypatch.undo()
    row = registry.job(ledger.job.id)
    assert (row.owner, row.epoch) == (first.owner, 1)
    assert [k for k in audit_kinds(registry, ledger.job.id) if k in ("followed", "taken_over")] == ["followed"]
    assert ledger_module._HELD == held_before


def test_a_waits_take_over_takes_the_job_only_from_the_owner_it_found_gone(store: tuple[Workspace, Registry]) -> None:
    """A wait judged the owner gone, but before its take-over read the row another attempt of the node (a
    `--detach`ed job's follower) had taken the job: the wait's take-over names the owner it found gone
    (`expected`), so it raises, writes no line and holds nothing, and the live attempt keeps the job. (CI saw the
    second take-over succeed: a detached job's log had two `followed` lines.)"""
    ws, registry = store
    ledger = register_delivered(ws, registry, topic_prefix="mam/t")
    gone = registry.job(ledger.job.id).owner
    first = Ledger.take_over(ws, registry, ledger.job.id, expected=gone)
    held_before = set(ledger_module._HELD)
    with pytest.raises(TakenOver):
        Ledger.take_over(ws, registry, ledger.job.id, expected=gone)
    row = registry.job(ledger.job.id)
    assert (row.owner, row.epoch) == (first.owner, 1)
    assert [k for k in audit_kinds(registry, ledger.job.id) if k in ("followed", "taken_over")] == ["followed"]
    assert ledger_module._HELD == held_before


# -- what carries the epoch -------------------------------------------------------------------------------------
def dispatch(epoch: int = 0, text: str = "the brief") -> Dispatch:
    return Dispatch(
        job_id="job-0123456789abcdef",
        runner="rb",
        session="d1",
        text=text,
        key_nonce="0" * 32,
        nonce="n0nce",
        ts=rec.now_ms(),
        start_deadline_ms=60_000,
        heartbeat_ms=30_000,
        heartbeat_k=4,
        budget_ms=3_600_000,
        origin="/origin",
        epoch=epoch,
    )


def open_dispatch(raw: bytes) -> Dispatch:
    return Dispatch.open(raw, secret=SECRET, runner="rb", now_ms=rec.now_ms(), freshness_ms=60_000)


def test_a_dispatch_carries_its_epoch_and_one_without_reads_as_0() -> None:
    assert open_dispatch(dispatch(3).encode(SECRET)).epoch == 3
    env = Envelope.decode(dispatch(0).encode(SECRET), max_bytes=2**20)
    older = Envelope(**{**env.as_dict(), "body": {k: v for k, v in env.body.items() if k != "epoch"}, "sig": ""})
    assert "epoch" not in older.body
    assert open_dispatch(older.signed(SECRET).encode()).epoch == 0  # a dispatch from a mam before epochs
    bad = Envelope(**{**env.as_dict(), "body": {**env.body, "epoch": "1"}, "sig": ""}).signed(SECRET).encode()
    with pytest.raises(Exception, match="epoch") as e:
        open_dispatch(bad)
    assert getattr(e.value, "reason", None) == Rejected.BAD_SHAPE


def test_a_runner_copys_events_carry_its_epoch_and_a_local_jobs_do_not(store: tuple[Workspace, Registry]) -> None:
    ws, registry = store
    settings = load_settings(environ={"MAM_DISPATCH_SECRET": SECRET})
    job = RunnerJob.take(dispatch(2), ws=ws, settings=settings, runner="rb", secret=SECRET, fence=Fence())
    job.drop()
    sent = Emitter(ws, registry).emit("job-0123456789abcdef", "progress", {"message": "hi"})
    assert sent.envelope.body["epoch"] == 2 and sent.envelope.verify(dispatch().token(SECRET))
    local = register_delivered(ws, registry, topic_prefix="mam/t", started=True)
    assert "epoch" not in Emitter(ws, registry).emit(local.job.id, "progress", {"message": "hi"}).envelope.body


# -- the origin refuses an older epoch ----------------------------------------------------------------------------
def test_the_gate_refuses_an_older_epoch_and_keeps_its_seq_free() -> None:
    gate = EventGate("job-x", TOKEN, last_seq=2, epoch=1)
    stale = gate.check(event("job-x", 3))  # no epoch: 0
    assert (stale.accepted, stale.reason) == (False, Rejected.STALE_EPOCH)
    assert gate.check(event("job-x", 3, epoch="1")).reason == Rejected.BAD_SHAPE
    live = gate.check(event("job-x", 3, epoch=1))
    assert live.accepted and live.gap == 0  # the stale event used up no seq
    assert EventGate("job-x", TOKEN, last_seq=2).check(event("job-x", 3)).accepted  # a local job: unchecked


def test_an_event_at_an_epoch_the_origin_never_issued_is_refused_and_uses_no_seq() -> None:
    """Issue 39, item 12: a token holder signs an event at an epoch above the job's (no attempt issued it)."""
    gate = EventGate("job-x", TOKEN, last_seq=2, epoch=1)
    future = gate.check(event("job-x", 3, "completed", epoch=2))
    assert (future.accepted, future.reason) == (False, Rejected.FUTURE_EPOCH)
    assert gate.check(event("job-x", 3, epoch=1)).accepted  # the live copy's event takes seq 3 after all


def test_the_intake_notes_a_future_epoch_and_the_job_is_unchanged(store: tuple[Workspace, Registry]) -> None:
    ws, registry = store
    ledger = remote_ledger(ws, registry)  # epoch 0
    intake = Intake(ledger, registry, local=False, on_stale=lambda _e: None)
    intake.feed(event(ledger.job.id, 3, "completed", epoch=5))
    intake.pump(0)
    assert ledger.job.state is JobState.RUNNING and registry.job(ledger.job.id).state == "running"
    with registry.read() as conn:
        last = conn.execute(
            "SELECT kind, line FROM job_audit WHERE job_id=? ORDER BY n DESC LIMIT 1", (ledger.job.id,)
        ).fetchone()
    assert last[0] == "rejected" and "future_epoch" in last[1]


def test_a_late_result_from_an_older_epoch_is_noted_and_changes_nothing(store: tuple[Workspace, Registry]) -> None:
    ws, registry = store
    first = remote_ledger(ws, registry)
    ledger = Ledger.take_over(ws, registry, first.job.id)  # the job moved on: epoch 1
    revoked: list[int] = []
    intake = Intake(ledger, registry, local=False, on_stale=revoked.append)
    intake.feed(event(ledger.job.id, 3, "completed", sender="agent"))
    intake.pump(0)
    assert ledger.job.state is JobState.RUNNING and registry.job(ledger.job.id).state == "running"
    assert audit_kinds(registry, ledger.job.id)[-1] == "stale_epoch" and revoked == [0]
    intake.feed(event(ledger.job.id, 3, "completed", epoch=1))  # the runner at the new epoch: it lands
    intake.pump(0)
    assert ledger.job.state is JobState.COMPLETED


# -- the runner's copy stops, typing nothing -------------------------------------------------------------------------
def runner_with_copy(ws: Workspace, epoch: int = 0) -> tuple[Runner, str]:
    settings = load_settings(environ={"MAM_DISPATCH_SECRET": SECRET})
    runner = Runner("rb", ws, settings, allow_insecure=True)
    job = RunnerJob.take(dispatch(epoch), ws=ws, settings=settings, runner="rb", secret=SECRET, fence=runner.fence)
    job.drop()
    runner._followed[job.attempt.ledger.job.id] = lambda _t, _p, _r: None
    return runner, job.attempt.ledger.job.id


def origin_says(job_id: str, type: str, epoch: int, state: str = "running", **more: object) -> bytes:
    body = {"state": state, "reason": "", "exit_code": None, "epoch": epoch, **more}
    env = Envelope(kind="state", job=job_id, seq=3, type=type, sender="wrapper", ts=rec.now_ms(), body=body)
    return env.signed(dispatch().token(SECRET)).encode()


def test_a_revoke_for_a_newer_epoch_stops_the_runners_copy_and_one_for_its_own_does_not(
    store: tuple[Workspace, Registry],
) -> None:
    ws, _registry = store
    runner, job_id = runner_with_copy(ws, epoch=1)
    try:
        for older in (origin_says(job_id, "revoke", 1, revoked=0), origin_says(job_id, "state", 0, "completed")):
            runner._states.put((job_id, older))  # its own epoch's revoke; an older attempt's final state
        runner._follow_states()
        assert runner.registry.job(job_id).open and not runner.fence.why(job_id)
        runner._states.put((job_id, origin_says(job_id, "revoke", 2, revoked=1)))
        runner._follow_states()
        row = runner.registry.job(job_id)
        assert (row.state, row.reason) == ("cancelled", Reason.REVOKED)
        assert "epoch 2" in runner.fence.why(job_id)
    finally:
        runner.registry.close()


def test_a_final_state_fences_the_copy_as_the_origin_ended_it(store: tuple[Workspace, Registry]) -> None:
    ws, _registry = store
    runner, job_id = runner_with_copy(ws)
    try:
        runner._states.put((job_id, origin_says(job_id, "state", 0, "failed", reason="agent_blocked")))
        runner._follow_states()
        row = runner.registry.job(job_id)
        assert (row.state, row.reason) == ("failed", "origin_agent_blocked")
        assert runner.fence.why(job_id).startswith("ended at the origin")
    finally:
        runner.registry.close()


def test_a_fenced_copy_types_nothing_and_reports_nothing(store: tuple[Workspace, Registry]) -> None:
    ws, registry = store
    settings = load_settings(environ={"MAM_DISPATCH_SECRET": SECRET})
    fence = Fence()
    job = RunnerJob.take(dispatch(), ws=ws, settings=settings, runner="rb", secret=SECRET, fence=fence)
    job.drop()
    ledger = job.attempt.ledger
    ledger.registry = registry  # the test's own connection to the same store
    fence.stop(ledger.job.id, "revoked by the origin")
    delivery = FencedDelivery(
        Target("d1", "d1"), job_id=ledger.job.id, fence=fence, ws=ws, settings=settings, registry=registry
    )
    # No session d1 exists here: anything that tried to reach a pane would fail otherwise than with the fence.
    with pytest.raises(Exception, match="fenced before its brief was typed"):
        delivery.inject("the brief", ledger)
    assert (ledger.job.state, ledger.job.reason) == (JobState.CANCELLED, Reason.REVOKED)
    assert delivery.type_idle("a reminder").startswith("fenced")
    delivery.nudge(ledger)  # nothing to press
    ToOrigin(ws, registry, fence).report(ledger.job.id, "error", {"reason": "x", "detail": "y"})
    with registry.read() as conn:
        assert conn.execute("SELECT COUNT(*) FROM events WHERE job_id=?", (ledger.job.id,)).fetchone()[0] == 0
