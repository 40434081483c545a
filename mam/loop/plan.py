"""The planning phase: the planner writes the plan, the creator challenges it for up to
`plan_talk` turns, the planner answers each challenge; the final plan goes to the creator.
"""

from __future__ import annotations

from mam.jobs.delegate import Outcome
from mam.loop import briefs
from mam.loop.jobs import Brief, failed
from mam.loop.model import LoopFailed, LoopRun


def make_plan(ctx: LoopRun) -> str:
    req, files = ctx.req, ctx.files
    planner = req.planner or req.creator
    out = ctx.send(
        Brief(
            planner,
            briefs.plan_brief(ctx.loop_id, req.task, files.plan, str(ctx.workdir)),
            "loop-plan",
            copy_to=files.root / "brief-plan.md",
        )
    )
    _ok(out, f"the planner {planner!r}")
    plan = _read_plan(ctx, out)
    ctx.log("plan", planner=planner, file=str(files.plan), chars=len(plan))
    if planner == req.creator or req.plan_talk <= 0:
        return plan
    for turn in range(1, req.plan_talk + 1):
        out = ctx.send(
            Brief(
                req.creator,
                briefs.challenge_brief(ctx.loop_id, req.task, plan, turn, req.plan_talk),
                "loop-challenge",
                copy_to=files.root / f"brief-challenge-{turn}.md",
            )
        )
        _ok(out, f"the creator {req.creator!r} (plan challenge {turn})")
        challenge = (out.report or out.result).strip()
        if _accepts(challenge):
            ctx.log("plan-accepted", turn=turn)
            return plan
        ctx.log("plan-challenge", turn=turn, challenge=challenge[:1000])
        out = ctx.send(
            Brief(
                planner,
                briefs.answer_brief(ctx.loop_id, req.task, challenge or "(no text)", files.plan, turn),
                "loop-plan-answer",
                copy_to=files.root / f"brief-plan-answer-{turn}.md",
            )
        )
        _ok(out, f"the planner {planner!r} (answer {turn})")
        plan = _read_plan(ctx, out)
        ctx.log("plan-answer", turn=turn, chars=len(plan))
    ctx.log("plan-talk-ended", turns=req.plan_talk)
    return plan


def _accepts(text: str) -> bool:
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    return bool(lines) and lines[-1] == briefs.PLAN_OK


def _ok(out: Outcome, who: str) -> None:
    problem = failed(out)
    if problem:
        raise LoopFailed(f"{who} did not finish its job: {problem}")


def _read_plan(ctx: LoopRun, out: Outcome) -> str:
    try:
        text = ctx.files.plan.read_text(encoding="utf-8", errors="replace").strip()
    except FileNotFoundError:
        text = ""
    text = text or out.report.strip()
    if not text:
        raise LoopFailed(f"the planner wrote no plan (expected it in {ctx.files.plan})")
    return text
