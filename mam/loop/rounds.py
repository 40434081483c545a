"""One review round: wait for the creator's sub-jobs, snapshot the source, run every reviewer
at once, parse the verdicts, and snapshot again. If the source changed while the reviewers
worked, the round's approvals are discarded and the round is reviewed again (bounded).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from mam.jobs.delegate import Outcome
from mam.loop import briefs
from mam.loop.jobs import Brief, failed
from mam.loop.model import LoopFailed, LoopRun
from mam.loop.reports import Review
from mam.loop.snapshot import Snapshot, take_snapshot
from mam.loop.subjobs import SubJob, wait_subjobs
from mam.loop.verdict import Verdict, parse_verdict
from mam.util.fs import atomic_write


@dataclass(frozen=True)
class RoundOutcome:
    number: int
    reviews: list[Review]
    snapshot: Snapshot | None
    subjobs: list[SubJob]
    repeats: int

    @property
    def passed(self) -> bool:
        return all(r.passed for r in self.reviews)

    def summary(self) -> dict[str, object]:
        return {
            "round": self.number,
            "passed": self.passed,
            "repeats": self.repeats,
            "snapshot": self.snapshot.identity() if self.snapshot else None,
            "reviews": [r.as_dict() for r in self.reviews],
            "subjobs": [s.as_dict() for s in self.subjobs],
        }


def snapshot(ctx: LoopRun) -> Snapshot | None:
    if ctx.repo is None or ctx.base is None:
        return None
    return take_snapshot(ctx.repo, ctx.base, ctx.environ, exclude=[ctx.ws.state, ctx.ws.root / ".agents" / "reports"])


def review_round(ctx: LoopRun, number: int, notes: Sequence[str]) -> RoundOutcome:
    repeats = 0
    while True:
        subjobs = _wait_subjobs(ctx, number)
        before = snapshot(ctx)
        ctx.log(
            "snapshot",
            round=number,
            attempt=repeats + 1,
            identity=before.identity() if before else None,
            **({} if before else {"why": ctx.no_identity}),
        )
        reviews = _review(ctx, number, before, subjobs, notes)
        broken = [(r, why) for r, why in reviews if why]
        if broken:
            raise LoopFailed("; ".join(f"the review job of {r.reviewer!r} did not finish: {why}" for r, why in broken))
        after = snapshot(ctx)
        if before is not None and after is not None and not before.same_source(after):
            repeats += 1
            moved = ctx.files.discard(number)
            ctx.log(
                "discarded",
                round=number,
                attempt=repeats,
                approvals=[r.reviewer for r, _ in reviews if r.passed],
                before=before.identity(),
                after=after.identity(),
                moved_to=str(moved),
                message=f"the source changed during round {number}: its approvals are discarded "
                f"and the round is reviewed again",
            )
            if repeats > ctx.req.max_repeats:
                raise LoopFailed(
                    f"the source kept changing during round {number}: reviewed {repeats} times, "
                    f"each time it changed before the reviewers finished (limit {ctx.req.max_repeats} repeats)"
                )
            continue
        return RoundOutcome(
            number=number, reviews=[r for r, _ in reviews], snapshot=before, subjobs=subjobs, repeats=repeats
        )


def _wait_subjobs(ctx: LoopRun, number: int) -> list[SubJob]:
    if not ctx.creator_jobs:
        return []
    settings = ctx.settings
    cap = ctx.req.subjob_wait_s if ctx.req.subjob_wait_s is not None else settings.job_timeout_s
    dispatch = ctx.req.dispatch_wait_s if ctx.req.dispatch_wait_s is not None else settings.dispatch_wait_s
    subjobs, waited = wait_subjobs(
        ctx.ws,
        ctx.registry,
        ctx.creator_jobs,
        max_wait_s=cap,
        dispatch_wait_s=dispatch,
        on_wait=lambda open_: ctx.log("subjobs-waiting", round=number, open=[s.as_dict() for s in open_]),
    )
    if subjobs:
        ctx.log("subjobs", round=number, waited=waited, jobs=[s.as_dict() for s in subjobs])
    return subjobs


def _review(
    ctx: LoopRun, number: int, snap: Snapshot | None, subjobs: list[SubJob], notes: Sequence[str]
) -> list[tuple[Review, str]]:
    self_review = ctx.reviewers == [ctx.req.creator]
    batch = []
    for reviewer in ctx.reviewers:
        report = ctx.files.report(number, reviewer)
        text = briefs.review_brief(
            ctx.loop_id,
            number,
            ctx.req.task,
            snapshot=snap,
            no_identity=ctx.no_identity,
            subjobs=subjobs,
            notes=notes,
            report_file=report,
            self_review=self_review,
        )
        batch.append(Brief(reviewer, text, "loop-review", copy_to=ctx.files.brief(number, reviewer, "review")))
    outcomes = ctx.runner.run_all(batch)
    results = []
    for reviewer, out in zip(ctx.reviewers, outcomes):
        review = _collect(reviewer, out, ctx.files.report(number, reviewer))
        ctx.log(
            "verdict",
            round=number,
            reviewer=reviewer,
            job=out.job_id,
            verdict=review.verdict.label,
            reason=review.verdict.reason,
            wellformed=review.verdict.wellformed,
            report=review.report_path,
        )
        results.append((review, failed(out)))
    return results


def _collect(reviewer: str, out: Outcome, path: Path) -> Review:
    """Read the report the reviewer wrote (or the one attached to its event) and parse its verdict."""
    try:
        text = path.read_text(encoding="utf-8", errors="replace")
    except FileNotFoundError:
        text = out.report
        if text:
            atomic_write(path, text.encode("utf-8"), fsync=False)
    if not text.strip():
        verdict = Verdict(False, f"the reviewer wrote no report (expected it in {path})", False)
    else:
        verdict = parse_verdict(text)
    return Review(reviewer, out.job_id, out.state, out.reason, verdict, str(path), text)
