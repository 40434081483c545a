"""The audit log is an export of the registry's numbered audit rows: a lost or torn tail is exported
again, once, by the next export of the job."""

from __future__ import annotations

import json

from mam.jobs.audit_log import replay, replay_job
from mam.jobs.ledger import Ledger, new_owner
from mam.jobs.model import Claim, Delivered, Event, Job
from mam.jobs.record import audit_path, read_audit
from mam.store import journal
from mam.store.registry import Registry
from mam.workspace import Workspace


def make(tmp_path) -> tuple[Workspace, Registry, Ledger]:
    ws = Workspace(tmp_path)
    reg = Registry(ws)
    job = Job(
        id="job-a",
        session="s",
        nonce="n",
        created_ms=0,
        start_deadline_ms=10_000,
        heartbeat_ms=1000,
        heartbeat_k=4,
        budget_ms=60_000,
    )
    return ws, reg, Ledger.register(ws, reg, job, owner=new_owner(), meta={"topic_prefix": "p"})


def test_a_lost_last_line_is_exported_again_from_the_registry(tmp_path) -> None:
    ws, reg, ledger = make(tmp_path)
    for inp in (
        Claim(1),
        Delivered(2),
        Event(3, 1, "started", "agent", {"nonce": "n"}),
        Event(4, 2, "completed", "agent", {}),
    ):
        ledger.apply(inp)
    assert replay_job(ws, "job-a").state.value == "completed"
    # as if the process died after committing its last transition but before exporting its line
    lines = audit_path(ws, "job-a").read_text().splitlines()
    audit_path(ws, "job-a").write_text("\n".join(lines[:-1]) + "\n")
    assert replay_job(ws, "job-a").state.value == "running"
    assert journal.export(reg, "job-a") == 1
    assert replay_job(ws, "job-a").state.value == "completed"
    assert journal.export(reg, "job-a") == 0
    assert audit_path(ws, "job-a").read_text().splitlines() == lines


def test_a_torn_last_line_is_cut_and_written_whole_by_the_next_commit(tmp_path) -> None:
    ws, reg, ledger = make(tmp_path)
    ledger.apply(Claim(1))
    whole = audit_path(ws, "job-a").read_text()
    audit_path(ws, "job-a").write_text(whole[: len(whole) - 10])  # killed in the middle of its write
    ledger.note("waiting", ahead=[])  # any later commit of the job exports what the file lacks
    lines = read_audit(ws, "job-a")
    assert [line["n"] for line in lines] == [1, 2, 3]
    assert [line["kind"] for line in lines] == ["created", "input", "waiting"]
    assert audit_path(ws, "job-a").read_text().startswith(whole)


def test_a_stale_record_is_exported_again(tmp_path) -> None:
    ws, reg, ledger = make(tmp_path)
    path = ws.job_record("job-a")
    before = json.loads(path.read_text())
    ledger.apply(Claim(1))
    path.write_text(json.dumps(before))  # as if the process died between the commit and the record
    journal.export(reg, "job-a")
    after = json.loads(path.read_text())
    assert after["state"] == "delivering" and after["token"] == before["token"]


def test_replay_orders_by_n_and_counts_each_line_once(tmp_path) -> None:
    ws, reg, ledger = make(tmp_path)
    ledger.apply(Claim(1))
    ledger.apply(Delivered(2))
    lines = read_audit(ws, "job-a")
    inputs = [line for line in lines if line["kind"] == "input"]
    shuffled = [lines[0], inputs[1], inputs[0], inputs[1]]  # out of order, one twice
    assert replay(shuffled).state.value == "delivered"
    assert [line["n"] for line in inputs] == [2, 3]  # after `created`, numbered 1
