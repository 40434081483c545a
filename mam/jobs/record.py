"""Reading a job's files: the live record `.mam/jobs/<id>.json` (0600: it holds the token) and the
append-only audit log `.mam/delegate_job_logs/<id>/audit.jsonl`. Both are written only by the
store's commit (`mam.store.journal`), as exports of the registry.

The audit log holds every input that changed the job and every event received or rejected,
so replaying it through the model gives the recorded state. It never holds the token.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from mam.errors import JobError, JobNotFound
from mam.store.common import AUDIT
from mam.store.common import now_ms as now_ms  # the clock of every job record and audit line
from mam.workspace import Workspace


def record_path(ws: Workspace, job_id: str) -> Path:
    return ws.job_record(job_id)


def audit_path(ws: Workspace, job_id: str) -> Path:
    return ws.job_log_dir(job_id) / AUDIT


def read_record(ws: Workspace, job_id: str) -> dict[str, Any]:
    path = record_path(ws, job_id)
    try:
        with open(path, encoding="utf-8") as f:
            data = json.load(f)
    except FileNotFoundError as e:
        raise JobNotFound(f"no job {job_id!r} in workspace {ws.root} (no {path.name})", job_id=job_id) from e
    except PermissionError as e:
        raise JobError(
            f"cannot read the record of job {job_id!r}: permission denied (run as the user who owns it)", job_id=job_id
        ) from e
    except ValueError as e:
        raise JobError(f"the record of job {job_id!r} is not valid JSON", job_id=job_id) from e
    if not isinstance(data, dict):
        raise JobError(f"the record of job {job_id!r} is malformed", job_id=job_id)
    return data


def read_audit(ws: Workspace, job_id: str) -> list[dict[str, Any]]:
    """Every parseable line of the audit log (a torn last line after a crash is skipped)."""
    path = audit_path(ws, job_id)
    out = []
    try:
        with open(path, encoding="utf-8") as f:
            for line in f:
                try:
                    out.append(json.loads(line))
                except ValueError:
                    continue
    except FileNotFoundError:
        pass
    return out
