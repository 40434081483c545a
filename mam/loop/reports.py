"""Promoting the final round's passing reports to `<workspace>/.agents/reports/<task-slug>/`.

Each promoted `report-<reviewer>.md` gets a `report-<reviewer>.identity.json` sidecar naming
exactly what was reviewed: base, head, tree (null without a git checkout), reviewer,
verdict, round and time, plus the loop and job ids.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path

from mam.loop.snapshot import Snapshot
from mam.loop.verdict import Verdict
from mam.util.fs import atomic_write, atomic_write_json
from mam.workspace import Workspace


@dataclass(frozen=True)
class Review:
    """One reviewer's answer in one round."""

    reviewer: str
    job_id: str
    job_state: str
    job_reason: str
    verdict: Verdict
    report_path: str
    report_text: str

    @property
    def passed(self) -> bool:
        return self.verdict.passed

    def as_dict(self) -> dict[str, object]:
        return {
            "reviewer": self.reviewer,
            "job": self.job_id,
            "job_state": self.job_state,
            "job_reason": self.job_reason,
            "report": self.report_path,
            **self.verdict.as_dict(),
        }


def reports_dir(ws: Workspace, slug: str) -> Path:
    return ws.root / ".agents" / "reports" / slug


def promote(
    ws: Workspace, slug: str, reviews: list[Review], *, snapshot: Snapshot | None, round_number: int, loop_id: str
) -> list[str]:
    """Copy the passing reports and write their sidecars; return the promoted report paths."""
    folder = reports_dir(ws, slug)
    if folder.is_dir():  # an earlier loop's reports for this task would pass for this change's
        for old in [*folder.glob("report-*.md"), *folder.glob("report-*.identity.json")]:
            old.unlink()
    promoted = []
    for review in reviews:
        if not review.passed:
            continue
        report = folder / f"report-{review.reviewer}.md"
        atomic_write(report, review.report_text.encode("utf-8"))
        identity = {
            "base": snapshot.base if snapshot else None,
            "head": snapshot.head if snapshot else None,
            "tree": snapshot.tree if snapshot else None,
            "repo": snapshot.repo if snapshot else None,
            "reviewer": review.reviewer,
            "verdict": review.verdict.label,
            "round": round_number,
            "time": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
            "loop": loop_id,
            "job": review.job_id,
        }
        atomic_write_json(folder / f"report-{review.reviewer}.identity.json", identity)
        promoted.append(str(report))
    return promoted
