"""Job-level helpers for end-to-end tests: demo sessions, pane captures, audit replays."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

from mam.jobs.model import Job
from mam.jobs.record import read_audit
from mam.workspace import Workspace
from tests.helpers.mamcli import mam

FAST = {"MAM_POLL_S": "0.05", "MAM_HEARTBEAT_K": "4"}


def create_demo(
    name: str,
    *,
    behaviour: str = "ok",
    env: dict[str, str] | None = None,
    role: str = "dev",
    extra: tuple[str, ...] = (),
) -> dict[str, Any]:
    proc = mam(
        "session",
        "create",
        "--agent",
        "demo",
        "--role",
        role,
        "--session",
        name,
        "--json",
        *extra,
        env={"MAM_DEMO_BEHAVIOUR": behaviour, **(env or {})},
        check=True,
    )
    return json.loads(proc.stdout)


def capture(tmux_name: str, pane_id: str) -> str:
    out = subprocess.run(
        ["tmux", "-L", tmux_name, "capture-pane", "-p", "-J", "-S", "-", "-t", pane_id], capture_output=True, text=True
    )
    return out.stdout


def replayed_state(ws: Workspace, job_id: str) -> Job:
    """Fold the audit log's inputs through the model, from the job as it was created."""
    from mam.jobs.audit_log import replay_job

    return replay_job(ws, job_id)


def audit_kinds(ws: Workspace, job_id: str) -> list[dict[str, Any]]:
    return read_audit(ws, job_id)


def record(ws: Workspace, job_id: str) -> dict[str, Any]:
    return json.loads(Path(ws.job_record(job_id)).read_text())
