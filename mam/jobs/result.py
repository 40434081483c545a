"""What one attempt at a job returns (`mam job delegate --json`, the MCP tool): the job's final record.

Kept apart from the attempt (mam/jobs/attempt.py) so that registering a job never imports what
driving it needs (the MQTT client, the pane backends).
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any

from mam.jobs.model import Job
from mam.outcomes import TAKEN_OVER_DETAIL, TAKEN_OVER_EXIT
from mam.store.registry import Registry


@dataclass(frozen=True)
class Outcome:
    job_id: str
    state: str
    reason: str
    exit_code: int
    detail: str = ""
    result: str = ""
    report: str = ""
    record: dict[str, Any] = field(default_factory=dict)
    taken_over: bool = False
    attached: bool = False  # this call attached to a job its idempotency key named (mam.jobs.attach)

    def as_dict(self) -> dict[str, Any]:
        """What `mam job delegate --json` prints (and the MCP tool returns): the final record, never the token."""
        return {
            **self.record,
            "id": self.job_id,
            "state": self.state,
            "reason": self.reason,
            "exit_code": self.exit_code,
            "detail": self.detail,
            "result": self.result,
            "taken_over": self.taken_over,
            "attached": self.attached,
        }


def outcome_from_dict(data: dict[str, Any]) -> Outcome:
    """The Outcome a `mam job delegate --json` (or `mam job wait --json`) printed (`Outcome.as_dict`)."""
    named = {"id", "state", "reason", "exit_code", "detail", "result", "taken_over", "attached"}
    return Outcome(
        job_id=str(data["id"]),
        state=str(data["state"]),
        reason=str(data.get("reason") or ""),
        exit_code=int(data["exit_code"]),
        detail=str(data.get("detail") or ""),
        result=str(data.get("result") or ""),
        report=str(data.get("report") or ""),
        record={k: v for k, v in data.items() if k not in named},
        taken_over=bool(data.get("taken_over")),
        attached=bool(data.get("attached")),
    )


def ended_line(job: dict[str, Any]) -> str:
    """How a job that did not complete is told to a person, the same from the CLI (stderr) and MCP
    (the tool error's text): `job ID: STATE (REASON): DETAIL`."""
    detail = f": {job['detail']}" if job.get("detail") else ""
    return f"job {job['id']}: {job['state']} ({job.get('reason') or '-'}){detail}"


def outcome_from_row(registry: Registry, job_id: str) -> Outcome:
    row = registry.job(job_id)
    job = Job.from_dict(row.data.get("job", {}))
    record = {**job.as_dict(), **row.data.get("meta", {}), "owner": row.owner}
    code = row.exit_code if row.exit_code is not None else -1
    return Outcome(
        job_id=job_id,
        state=row.state,
        reason=row.reason,
        exit_code=code,
        detail=job.detail,
        result=job.result,
        report=job.report,
        record=record,
    )


def taken_over_outcome(registry: Registry, job_id: str) -> Outcome:
    """What an attempt answers when another attempt drives its job: the job as it is, `taken_over`."""
    out = outcome_from_row(registry, job_id)
    return replace(out, exit_code=TAKEN_OVER_EXIT, detail=TAKEN_OVER_DETAIL, taken_over=True)
