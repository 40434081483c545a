"""`mam job replay`: folding a job's audit log through the model gives the live state, for any
sequence of inputs the wrapper commits (a hypothesis property); a tampered log diverges."""

from __future__ import annotations

import json
import tempfile
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from mam.jobs.audit_log import check
from mam.jobs.ledger import Ledger, new_owner
from mam.jobs.model import Claim, Delivered, Event, Job
from mam.jobs.record import audit_path
from mam.store.registry import Registry
from mam.workspace import Workspace
from tests.helpers.mamcli import mam
from tests.unit.test_job_model import inputs


def _register(root: Path) -> tuple[Workspace, Registry, Ledger]:
    ws = Workspace(root)
    registry = Registry(ws)
    job = Job(
        id="job-r",
        session="s",
        nonce="n0nce",
        created_ms=0,
        start_deadline_ms=10_000,
        heartbeat_ms=1000,
        heartbeat_k=4,
        budget_ms=60_000,
    )
    return ws, registry, Ledger.register(ws, registry, job, owner=new_owner(), meta={"topic_prefix": "p"})


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(inputs, max_size=25))
def test_replaying_the_audit_log_gives_the_live_state(sequence) -> None:
    with tempfile.TemporaryDirectory() as folder:
        ws, registry, ledger = _register(Path(folder))
        try:
            for inp in sequence:
                ledger.apply(inp)
            live = registry.job("job-r").data["job"]
            out = check(ws, registry, "job-r")
            assert out.equal, out.as_dict(verbose=True)
            assert out.derived == Job.from_dict(live).as_dict()
            assert out.derived["state"] == registry.job("job-r").state
        finally:
            registry.close()


def test_replay_cli_says_equal_and_where_a_tampered_log_diverges(tmp_path: Path) -> None:
    ws, registry, ledger = _register(tmp_path)
    for inp in (Claim(1), Delivered(2), Event(3, 1, "started", "agent", {"nonce": "n0nce"})):
        ledger.apply(inp)
    ledger.apply(Event(4, 2, "completed", "agent", {"message": "done"}))
    registry.close()
    path = audit_path(ws, "job-r")
    before = path.read_bytes()
    ok = mam("-w", str(tmp_path), "job", "replay", "job-r", "--json", "--verbose")
    assert ok.returncode == 0, ok.stderr
    out = json.loads(ok.stdout)
    assert out["equal"] and out["derived"]["state"] == "completed" and out["transitions"] == 4
    assert [s["derived"]["state"] for s in out["steps"]] == ["delivering", "delivered", "running", "completed"]
    assert path.read_bytes() == before  # it only reads
    # Drop the `completed` event from the log: the replay stops at running, the record says completed.
    lines = [json.loads(line) for line in before.decode().splitlines()]
    kept = [line for line in lines if not (line.get("kind") == "input" and line["input"].get("type") == "completed")]
    path.write_text("".join(json.dumps(line) + "\n" for line in kept))
    bad = mam("-w", str(tmp_path), "job", "replay", "job-r")
    assert bad.returncode == 1
    assert "derived running" in bad.stdout and "state: derived 'running', recorded 'completed'" in bad.stderr
    # A log line that disagrees with the model's step is named as the first divergence.
    for line in kept:
        if line.get("kind") == "input" and line["input"].get("type") == "started":
            line["state"] = "failed"
    path.write_text("".join(json.dumps(line) + "\n" for line in kept))
    diverged = json.loads(mam("-w", str(tmp_path), "job", "replay", "job-r", "--json").stdout)
    assert diverged["first_divergence"] == 2 and not diverged["equal"]
    assert mam("-w", str(tmp_path), "job", "replay", "job-nope").returncode == 5
    assert mam("-w", str(tmp_path), "job", "replay", "bad/id").returncode == 2
