"""Replaying a job's audit log through the job model.

Every audit line is stored in SQLite, numbered `n`, in the same transaction as the state it goes
with, and exported to `.mam/delegate_job_logs/<id>/audit.jsonl` by the store's commit
(`mam.store.journal`). `replay` folds the transition lines ("input") in `n` order, each once.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from mam.jobs import record as rec
from mam.jobs.model import Job, input_from_dict
from mam.jobs.model import replay as fold
from mam.workspace import Workspace


def replay(lines: Iterable[dict[str, Any]]) -> Job:
    """The job state the audit lines give: the created job, then each transition in `n` order, once."""
    lines = list(lines)
    created = next(line for line in lines if line.get("kind") == "created")
    seen: dict[int, dict[str, Any]] = {}
    unnumbered = []
    for line in lines:
        if line.get("kind") != "input":
            continue
        n = line.get("n")
        if isinstance(n, int):
            seen.setdefault(n, line)
        else:
            unnumbered.append(line)
    ordered = unnumbered + [seen[n] for n in sorted(seen)]
    return fold(Job.from_dict(created["job"]), [input_from_dict(line["input"]) for line in ordered])


def replay_job(ws: Workspace, job_id: str) -> Job:
    return replay(rec.read_audit(ws, job_id))
