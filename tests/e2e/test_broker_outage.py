"""The broker killed between `started` and `completed`: a local job still completes through the disk path."""

from __future__ import annotations

import json

import pytest

from tests.helpers.jobs import FAST, create_demo, replayed_state
from tests.helpers.mamcli import mam, spawn_mam


@pytest.mark.parametrize("kind", ["amqtt", "mosquitto"])
def test_local_job_completes_through_the_disk_path(workspace, own_broker, monkeypatch, poll, kind):
    broker = own_broker(kind)
    for key, value in {**broker.env(), **FAST}.items():
        monkeypatch.setenv(key, value)
    create_demo("w")
    # The turn goes on until the broker is dead (demo-await), however slow the machine: with a fixed 3 s of
    # work a loaded CI machine ended the job between two of the test's looks, which never saw it running.
    go = workspace.root / "go"
    job = spawn_mam(
        "job",
        "delegate",
        "--target",
        "w",
        "--brief",
        f"demo-await: {go}\ndemo-write: after.txt :: survived",
        "--job-id",
        "job-outage",
        "--start-deadline",
        "10",
        "--heartbeat",
        "0.5",
        "--json",
    )
    try:
        poll(lambda: _state("job-outage") == "running", timeout=120, message="the job never ran")
        broker.kill()
        go.touch()
        out, err = job.communicate(timeout=60)
        assert job.returncode == 0, err
        assert json.loads(out)["state"] == "completed"
        assert (workspace.root / "after.txt").read_text() == "survived\n"
        assert replayed_state(workspace, "job-outage").state.value == "completed"
    finally:
        go.touch()
        if job.poll() is None:
            job.kill()


def _state(job_id: str) -> str:
    proc = mam("job", "status", job_id, "--json")
    return str(json.loads(proc.stdout)["state"]) if proc.returncode == 0 else ""
