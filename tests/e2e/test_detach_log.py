"""A `--detach`ed job's audit log reads as the normal run it is: the node's own hand-over to the wait that
follows the job is `followed`, never a `taken_over` (which says another process took the job over)."""

from __future__ import annotations

import json

import pytest

from tests.e2e.test_delegate_output import SHORT
from tests.helpers.jobs import FAST, create_demo
from tests.helpers.mamcli import mam


@pytest.fixture
def wired(workspace, amqtt_broker, monkeypatch):
    for key, value in {**amqtt_broker.env(), **FAST}.items():
        monkeypatch.setenv(key, value)
    return workspace


def test_a_detached_jobs_log_has_no_taken_over_line(wired):
    create_demo("dev-1")
    job = mam("job", "delegate", "--target", "dev-1", "--brief", "demo-sleep: 1", *SHORT, "--detach", check=True)
    job_id = job.stdout.strip()
    assert json.loads(mam("job", "wait", job_id, "--json", check=True).stdout)["state"] == "completed"
    lines = json.loads(mam("job", "log", job_id, "--json", check=True).stdout)
    kinds = [line["kind"] for line in lines]
    assert "taken_over" not in kinds, kinds
    followed = [line for line in lines if line["kind"] == "followed"]
    assert len(followed) == 1 and followed[0]["epoch"] == 1, lines
    # The same process let go and followed on: the owners differ only in their last part.
    assert followed[0]["owner"].rsplit(":", 1)[0] == followed[0]["previous_owner"].rsplit(":", 1)[0]
    assert "followed" in mam("job", "log", job_id, check=True).stdout
