"""The audit log as a mirror of the registry's transition lines, and replaying it.

Every transition line ("input") is stored in SQLite in the same transaction as the state it
produced, numbered `n`, and then appended to `.mam/delegate_job_logs/<id>/audit.jsonl`. A process
killed between the commit and the append leaves the file behind; `repair` appends what is
missing (marked `repaired`), and `replay` folds the lines in `n` order through the job model.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from mam.jobs import record as rec
from mam.jobs.model import Job, input_from_dict
from mam.jobs.model import replay as fold
from mam.store import jobs as jobs_table
from mam.store.registry import Registry
from mam.workspace import Workspace


def repair(ws: Workspace, registry: Registry, job_id: str) -> int:
    """Append the stored transition lines the audit file lacks; return how many."""
    with registry.read() as conn:
        stored = jobs_table.inputs(conn, job_id)
    if not stored:
        return 0
    have = {line.get("n") for line in rec.read_audit(ws, job_id) if line.get("kind") == "input"}
    missing = [line for line in stored if line["n"] not in have]
    if missing:
        rec.audit_many(ws, job_id, [("input", {**line, "repaired": True}) for line in missing])
    return len(missing)


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
