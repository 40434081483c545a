"""A job's files: the live record `.mam/jobs/<id>.json` (0600: it holds the token) and the
append-only audit log `.mam/delegate_job_logs/<id>/audit.jsonl`.

The audit log holds every input that changed the job and every event received or rejected,
so replaying it through the model gives the recorded state. It never holds the token.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from mam.errors import JobError, JobNotFound
from mam.util.fs import append_line, atomic_write_json
from mam.workspace import Workspace

AUDIT = "audit.jsonl"
SECRET_FIELDS = ("token", "dispatch_secret")


def now_ms() -> int:
    return int(time.time() * 1000)


def record_path(ws: Workspace, job_id: str) -> Path:
    return ws.job_record(job_id)


def audit_path(ws: Workspace, job_id: str) -> Path:
    return ws.job_log_dir(job_id) / AUDIT


def write_record(ws: Workspace, job_id: str, record: dict[str, Any], *, fsync: bool = False) -> None:
    """Replace the live record atomically, readable by the owner only."""
    ws.jobs_dir.mkdir(mode=0o700, parents=True, exist_ok=True)
    atomic_write_json(record_path(ws, job_id), record, mode=0o600, fsync=fsync)


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


def public(record: dict[str, Any]) -> dict[str, Any]:
    """The record without secrets, for printing and logs."""
    return {k: v for k, v in record.items() if k not in SECRET_FIELDS}


def audit(ws: Workspace, job_id: str, kind: str, **fields: Any) -> None:
    """Append one line to the job's audit log (creating its folder, 0700)."""
    audit_many(ws, job_id, [(kind, fields)])


def audit_many(ws: Workspace, job_id: str, entries: Iterable[tuple[str, Mapping[str, Any]]]) -> None:
    """Append one line per (kind, fields), in order, with a single write: a burst costs about one line."""
    folder = ws.job_log_dir(job_id)
    stamp = {"ts_ms": now_ms(), "pid": os.getpid()}
    lines = [
        json.dumps(
            {**stamp, "kind": kind, **{k: v for k, v in fields.items() if k not in SECRET_FIELDS}},
            sort_keys=True,
            ensure_ascii=False,
            default=str,
        )
        for kind, fields in entries
    ]
    if not lines:
        return
    if not folder.is_dir():
        folder.mkdir(mode=0o700, parents=True, exist_ok=True)
    append_line(folder / AUDIT, "\n".join(lines))


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
