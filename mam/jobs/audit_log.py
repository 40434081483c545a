"""Replaying a job's audit log through the job model.

Every audit line is stored in SQLite, numbered `n`, in the same transaction as the state it goes
with, and exported to `.mam/delegate_job_logs/<id>/audit.jsonl` by the store's commit
(`mam.store.journal`). `replay` folds the transition lines ("input") in `n` order, each once.
`check` (`mam job replay`) does the same step by step and compares the result with the job's
recorded state; it only reads.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from mam.errors import JobError
from mam.jobs import record as rec
from mam.jobs.model import Job, advance, input_from_dict
from mam.store.registry import Registry
from mam.workspace import Workspace

STEP_FIELDS = ("state", "reason", "exit_code")  # what each transition line recorded after its input


def _transitions(lines: Iterable[dict[str, Any]]) -> tuple[Job, list[dict[str, Any]]]:
    """The created job and the transition lines in `n` order, each once."""
    lines = list(lines)
    created = next((line for line in lines if line.get("kind") == "created"), None)
    if created is None:
        raise JobError("the audit log has no `created` line: nothing to replay")
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
    return Job.from_dict(created["job"]), unnumbered + [seen[n] for n in sorted(seen)]


def replay(lines: Iterable[dict[str, Any]]) -> Job:
    """The job state the audit lines give: the created job, then each transition in `n` order, once."""
    job, ordered = _transitions(lines)
    for line in ordered:
        job = advance(job, input_from_dict(line["input"]))
    return job


def replay_job(ws: Workspace, job_id: str) -> Job:
    return replay(rec.read_audit(ws, job_id))


@dataclass(frozen=True)
class Step:
    n: int | None
    input: dict[str, Any]
    derived: dict[str, Any]  # state, reason, exit_code after this input, by the model
    logged: dict[str, Any]  # the same, as the audit line recorded them

    @property
    def agrees(self) -> bool:
        return self.derived == self.logged


@dataclass(frozen=True)
class Check:
    job_id: str
    derived: dict[str, Any]
    recorded: dict[str, Any]
    steps: list[Step] = field(default_factory=list)

    @property
    def differences(self) -> dict[str, dict[str, Any]]:
        """Every field of the job on which the replay and the record differ."""
        keys = sorted(set(self.derived) | set(self.recorded))
        return {
            k: {"derived": self.derived.get(k), "recorded": self.recorded.get(k)}
            for k in keys
            if self.derived.get(k) != self.recorded.get(k)
        }

    @property
    def first_divergence(self) -> int | None:
        """The index of the first step whose derived state differs from what its line recorded."""
        return next((i for i, s in enumerate(self.steps) if not s.agrees), None)

    @property
    def equal(self) -> bool:
        return not self.differences and self.first_divergence is None

    def as_dict(self, *, verbose: bool = False) -> dict[str, Any]:
        out: dict[str, Any] = {
            "id": self.job_id,
            "equal": self.equal,
            "derived": self.derived,
            "recorded": self.recorded,
            "differences": self.differences,
            "first_divergence": self.first_divergence,
            "transitions": len(self.steps),
        }
        if verbose:
            out["steps"] = [
                {"n": s.n, "input": s.input, "derived": s.derived, "logged": s.logged, "agrees": s.agrees}
                for s in self.steps
            ]
        return out


def check(ws: Workspace, registry: Registry, job_id: str) -> Check:
    """Fold the job's audit log through the model and compare with its recorded state (reads only)."""
    recorded = registry.job(job_id).data.get("job", {})  # JobNotFound for an unknown id
    job, ordered = _transitions(rec.read_audit(ws, job_id))
    steps = []
    for line in ordered:
        job = advance(job, input_from_dict(line["input"]))
        derived = job.as_dict()
        steps.append(
            Step(
                n=line.get("n"),
                input=line["input"],
                derived={k: derived[k] for k in STEP_FIELDS},
                logged={k: line.get(k) for k in STEP_FIELDS},
            )
        )
    return Check(job_id, job.as_dict(), Job.from_dict(recorded).as_dict(), steps)
