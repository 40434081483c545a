"""`mam job status ID` reads as a sentence for an open job and an ended one: never `None` (an open job has no
exit code yet, so none is shown)."""

from __future__ import annotations

from mam.store.registry import Registry
from mam.workspace import Workspace
from tests.helpers.jobs import register_delivered
from tests.helpers.mamcli import mam


def test_an_open_job_and_an_ended_one_print_no_none(workspace: Workspace) -> None:
    registry = Registry(workspace)
    try:
        job_id = register_delivered(workspace, registry, topic_prefix="test/status", started=True).job.id
    finally:
        registry.close()
    text = mam("job", "status", job_id, check=True).stdout
    assert text == f"{job_id}: running session worker\n", text
    mam("job", "cancel", job_id, check=True)
    text = mam("job", "status", job_id, check=True).stdout
    assert text == f"{job_id}: cancelled (cancelled_by_user) session worker exit 5\n", text
    assert "None" not in text
