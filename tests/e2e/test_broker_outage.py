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
    create_demo("w", behaviour="slow", env={"MAM_DEMO_SLEEP_S": "3"})
    job = spawn_mam(
        "job",
        "delegate",
        "--target",
        "w",
        "--brief",
        "demo-write: after.txt :: survived",
        "--job-id",
        "job-outage",
        "--start-deadline",
        "10",
        "--heartbeat",
        "0.5",
        "--json",
    )
    try:
        poll(
            lambda: (
                mam("job", "status", "job-outage", "--json").returncode == 0
                and json.loads(mam("job", "status", "job-outage", "--json").stdout)["state"] == "running"
            ),
            timeout=30,
        )
        broker.kill()
        out, err = job.communicate(timeout=60)
        assert job.returncode == 0, err
        assert json.loads(out)["state"] == "completed"
        assert (workspace.root / "after.txt").read_text() == "survived\n"
        assert replayed_state(workspace, "job-outage").state.value == "completed"
    finally:
        if job.poll() is None:
            job.kill()
