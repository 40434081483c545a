"""`run_loop`: plan (optional), implement, then review rounds until every reviewer passes.

Exit codes: 0 every reviewer passed; 1 not passed after `max_loop` rounds, or a job the
loop depends on failed, or the source never held still during a round. Errors raised
before the loop starts keep their own codes (usage 2, unknown session 5, lock busy 4).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from functools import partial
from pathlib import Path
from typing import Any

from mam.errors import UsageError
from mam.jobs.delegate import Outcome
from mam.jobs.pause import wait_released
from mam.loop import approval, briefs
from mam.loop.files import LoopFiles, LoopLog, OnEvent, loop_folder, new_loop_id, task_slug
from mam.loop.jobs import Brief, JobOptions, JobSender, failed
from mam.loop.lock import loop_lock
from mam.loop.model import EXIT_NOT_PASSED, EXIT_PASSED, LoopFailed, LoopRequest, LoopResult, LoopRun, LoopState
from mam.loop.plan import make_plan
from mam.loop.reports import Review, promote
from mam.loop.roles import choose_reviewers, usable
from mam.loop.rounds import RoundOutcome, review_round
from mam.loop.snapshot import default_branch, resolve_base
from mam.notify import loop_ended, needs_approval
from mam.sessions.common import check_name
from mam.settings import Settings
from mam.store.pauses import PauseRow
from mam.store.registry import Registry
from mam.store.sessions import SessionRow
from mam.util.git import git_env, maybe, toplevel
from mam.workspace import Workspace

_SLUG = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,99}")
_REBUT = re.compile(r"\s*\[REBUT:\s*(?P<text>.*?)\s*\]\s*", re.S)


def run_loop(
    req: LoopRequest,
    *,
    ws: Workspace,
    settings: Settings,
    registry: Registry,
    on_event: OnEvent | None = None,
    environ: Mapping[str, str] | None = None,
) -> LoopResult:
    """Run one loop to its end. `environ` is the environment git runs with (the CLI passes its own)."""
    _check(req, ws)
    creator = usable(registry, req.creator, "creator")
    if req.planner:
        usable(registry, req.planner, "planner")
    reviewers, how = choose_reviewers(registry, req.creator, req.reviewers, req.all_reviewer)
    workdir, repo, no_identity = _locate(req, Path(creator.cwd), ws, environ)
    base, base_how = _base(req, creator, workdir, repo, environ) if repo else (None, "")
    branch, base_branch = _approval_branches(req, creator, repo, environ) if req.approve else ("", "")
    loop_id = req.loop_id or new_loop_id()
    with loop_lock(ws, repo or workdir, loop_id=loop_id, task=req.task):
        files = LoopFiles(ws, loop_id)
        log = LoopLog(files.log, loop_id, on_event)
        options = JobOptions(req.timeout_s, req.start_deadline_s, req.heartbeat_s, req.dispatch_wait_s)
        ctx = LoopRun(
            req=req,
            loop_id=loop_id,
            ws=ws,
            settings=settings,
            registry=registry,
            files=files,
            log=log,
            runner=JobSender(ws=ws, options=options, log=log, environ=environ),
            environ=environ,
            workdir=workdir,
            repo=repo,
            base=base,
            no_identity=no_identity,
            reviewers=reviewers,
            branch=branch,
            base_branch=base_branch,
        )
        log(
            "start",
            task=req.task[:2000],
            creator=req.creator,
            planner=req.planner,
            reviewers=reviewers,
            chosen_by=how,
            workdir=str(workdir),
            repo=str(repo) if repo else None,
            base=base,
            base_from=base_how,
            identity=repo is not None,
            no_identity=no_identity or None,
            max_loop=req.max_loop,
            max_rebut=req.max_rebut,
            review_only=req.review_only,
            approve=req.approve or None,
            branch=branch or None,
            base_branch=base_branch or None,
            folder=str(files.root),
        )
        history: list[RoundOutcome] = []
        state = {"rebuts": 0}
        try:
            result = _drive(ctx, history, state)
        except LoopFailed as e:
            result = _result(ctx, history, LoopState.FAILED, EXIT_NOT_PASSED, str(e), state["rebuts"], [])
        log(
            "end",
            state=result.state,
            exit_code=result.exit_code,
            reason=result.reason,
            rounds=result.rounds,
            promoted=result.promoted,
        )
        loop_ended(ws, settings, loop_id, {**vars(result), "creator": req.creator, "summary": result.reason})
        return result


def _check(req: LoopRequest, ws: Workspace) -> None:
    if req.loop_id is not None:
        check_name(req.loop_id, "loop id")
        if loop_folder(ws, req.loop_id).exists():
            raise UsageError(f"--loop-id {req.loop_id!r}: that loop already exists in {ws.root}")
    if not req.task.strip():
        raise UsageError("the task is empty")
    for name, value, low in (
        ("max-loop", req.max_loop, 1),
        ("max-rebut", req.max_rebut, 0),
        ("plan-talk", req.plan_talk, 0),
        ("max-repeats", req.max_repeats, 0),
    ):
        if value < low:
            raise UsageError(f"--{name} must be at least {low}")
    if req.slug is not None and not _SLUG.fullmatch(req.slug):
        raise UsageError(f"--slug {req.slug!r}: use letters, digits, '.', '_' or '-', starting with a letter or digit")


def _locate(
    req: LoopRequest, creator_cwd: Path, ws: Workspace, environ: Mapping[str, str] | None
) -> tuple[Path, Path | None, str]:
    """(folder the creator works in, git checkout to snapshot or None, why there is no snapshot identity)."""
    env = git_env(environ)
    if req.worktree:
        workdir = Path(req.worktree).expanduser().resolve()
        repo = toplevel(workdir, env)
        if repo is None:
            raise UsageError(f"--worktree-dir {req.worktree}: not a folder inside a git checkout")
        return workdir, repo, ""
    for folder in (creator_cwd, ws.root):
        repo = toplevel(folder, env)
        if repo is not None:
            return creator_cwd, repo, ""
    if req.base:
        raise UsageError(f"--base needs a git checkout, and neither {creator_cwd} nor {ws.root} is in one")
    return creator_cwd, None, f"neither the creator's folder {creator_cwd} nor the workspace is a git checkout"


def _base(
    req: LoopRequest, creator: SessionRow, workdir: Path, repo: Path, environ: Mapping[str, str] | None
) -> tuple[str, str]:
    """The base commit: --base; else, for a creator in its own worktree (`session create --worktree`), the
    merge-base of HEAD with the ref its branch was made from; else resolve_base's default."""
    if req.base or not creator.worktree or Path(creator.cwd) != workdir:
        return resolve_base(repo, req.base, environ)
    env = git_env(environ)
    merge_base = maybe(["merge-base", "HEAD", creator.base_commit], cwd=repo, env=env) if creator.base_commit else None
    if creator.base != "HEAD" and maybe(
        ["rev-parse", "--verify", "--quiet", f"refs/heads/{creator.base}"], cwd=repo, env=env
    ):
        merge_base = maybe(["merge-base", "HEAD", f"refs/heads/{creator.base}"], cwd=repo, env=env) or merge_base
    if not merge_base:
        return resolve_base(repo, None, environ)
    return merge_base, f"merge-base of HEAD and the base of {creator.name}'s worktree ({creator.base})"


def _approval_branches(
    req: LoopRequest, creator: SessionRow, repo: Path | None, environ: Mapping[str, str] | None
) -> tuple[str, str]:
    """(the reviewed branch, the branch an approval merges into); UsageError when --approve cannot work."""
    if repo is None:
        raise UsageError("--approve needs a git checkout to merge in, and the loop has none")
    env = git_env(environ)
    branch = maybe(["symbolic-ref", "--quiet", "--short", "HEAD"], cwd=repo, env=env)
    if not branch:
        raise UsageError(f"--approve: {repo} is not on a branch (a detached HEAD): nothing to merge")

    def local(name: str | None) -> str:
        if name and maybe(["rev-parse", "--verify", "--quiet", f"refs/heads/{name}"], cwd=repo, env=env):
            return name
        return ""

    default = default_branch(repo, env) or ""
    base_branch = (
        local(req.base)
        or local(creator.base if creator.worktree else None)
        or local(default.removeprefix("refs/heads/") if default.startswith("refs/heads/") else None)
    )
    if not base_branch:
        raise UsageError("--approve needs a base branch to merge into: pass --base BRANCH")
    if base_branch == branch:
        raise UsageError(
            f"--approve: the reviewed checkout {repo} is on the base branch {branch} itself; let the creator work on "
            f"a branch of its own (`mam session create ... --worktree`)"
        )
    return branch, base_branch


def _drive(ctx: LoopRun, history: list[RoundOutcome], state: dict[str, int]) -> LoopResult:
    req = ctx.req
    plan = make_plan(ctx) if (req.plan or req.planner) else ""
    if not req.review_only:
        out = ctx.send(
            Brief(
                req.creator,
                briefs.create_brief(ctx.loop_id, req.task, plan, str(ctx.workdir)),
                "loop-create",
                copy_to=ctx.files.root / "brief-create.md",
            )
        )
        _creator_ok(ctx, out, "implementation")
        ctx.log("created", job=out.job_id, result=out.result[:1000])
    notes: list[str] = []
    number = 0
    while True:
        number += 1
        # `mam pause --all`: no round starts until `mam resume --all` (its jobs would wait, held, anyway)
        wait_released(ctx.ws, ctx.registry, partial(_held, ctx, number))
        outcome = review_round(ctx, number, notes)
        history.append(outcome)
        failing = [r for r in outcome.reviews if not r.passed]
        if not failing:
            promoted = promote(
                ctx.ws,
                req.slug or task_slug(req.task),
                outcome.reviews,
                snapshot=outcome.snapshot,
                round_number=number,
                loop_id=ctx.loop_id,
            )
            ctx.log("passed", round=number, promoted=promoted)
            if not req.approve:
                return _result(
                    ctx,
                    history,
                    LoopState.PASSED,
                    EXIT_PASSED,
                    f"every reviewer passed in round {number}",
                    state["rebuts"],
                    promoted,
                )
            gate = _await_approval(ctx, outcome, number, promoted)
            decision = gate.get("decision") or {}
            if gate["state"] == approval.APPROVED:
                return _result(
                    ctx,
                    history,
                    LoopState.APPROVED,
                    EXIT_PASSED,
                    f"every reviewer passed in round {number}; approved by {decision['by']}: {decision['message']}",
                    state["rebuts"],
                    promoted,
                    decision=decision,
                )
            if gate["state"] == approval.REVIEW:
                notes = [briefs.review_again_note(number, decision.get("refused", ""))]
                continue
            if number >= req.max_loop:
                return _result(
                    ctx,
                    history,
                    LoopState.NOT_PASSED,
                    EXIT_NOT_PASSED,
                    f"rejected by {decision.get('by')} after round {number}, the last of --max-loop {req.max_loop}",
                    state["rebuts"],
                    [],
                    decision=decision,
                )
            notes = _fix_rejected(ctx, number, decision)
            continue
        ctx.log(
            "not-passed", round=number, failing=[{"reviewer": r.reviewer, "reason": r.verdict.reason} for r in failing]
        )
        if number >= req.max_loop:
            break
        notes = _fix(ctx, number, failing, state)
    return _result(
        ctx,
        history,
        LoopState.NOT_PASSED,
        EXIT_NOT_PASSED,
        f"not every reviewer passed after {req.max_loop} round(s)",
        state["rebuts"],
        [],
    )


def _held(ctx: LoopRun, number: int, held: PauseRow) -> None:
    ctx.log("held", round=number, by=held.by, mode=held.mode)


def _fix(ctx: LoopRun, number: int, failing: list[Review], state: dict[str, int]) -> list[str]:
    """Send the findings to the creator; return the notes the next round's reviewers get."""
    req = ctx.req
    left = req.max_rebut - state["rebuts"]
    out = ctx.send(
        Brief(
            req.creator,
            briefs.fix_brief(ctx.loop_id, number, req.task, failing, left, str(ctx.workdir)),
            "loop-fix",
            copy_to=ctx.files.brief(number, req.creator, "fix"),
        )
    )
    _creator_ok(ctx, out, f"fix after round {number}")
    match = _REBUT.fullmatch(out.result or "")
    if match is None:
        ctx.log("fixed", round=number, job=out.job_id, result=out.result[:1000])
        return [briefs.fixed_note(number, out.result)]
    text = match.group("text")
    if left > 0:
        state["rebuts"] += 1
        ctx.log(
            "rebut",
            round=number,
            job=out.job_id,
            accepted=True,
            used=state["rebuts"],
            limit=req.max_rebut,
            text=text[:2000],
        )
        return [briefs.rebut_note(number, text, state["rebuts"], req.max_rebut)]
    ctx.log(
        "rebut",
        round=number,
        job=out.job_id,
        accepted=False,
        limit=req.max_rebut,
        text=text[:2000],
        message="over --max-rebut: counted as a refusal to fix",
    )
    return [briefs.refusal_note(number, text)]


def _await_approval(ctx: LoopRun, outcome: RoundOutcome, number: int, promoted: list[str]) -> dict[str, Any]:
    """Open the approval gate for this round's identity, tell a person, and wait for their decision."""
    identity = outcome.snapshot.identity() if outcome.snapshot else None
    reports = [r.as_dict() for r in outcome.reviews]
    approval.open_gate(
        ctx.ws,
        ctx.loop_id,
        {
            "loop": ctx.loop_id,
            "round": number,
            "max_loop": ctx.req.max_loop,  # a reject of the last round ends the loop (`mam loop reject` says so)
            "identity": identity,
            "reports": reports,
            "promoted": promoted,
            "repo": str(ctx.repo),
            "branch": ctx.branch,
            "base_branch": ctx.base_branch,
            "creator": ctx.req.creator,
        },
    )
    message = (
        f"every reviewer passed round {number}; approve with `mam loop approve {ctx.loop_id}` "
        f"or reject with `mam loop reject {ctx.loop_id} --note TEXT`"
    )
    ctx.log(
        "needs_approval",
        round=number,
        identity=identity,
        branch=ctx.branch,
        base_branch=ctx.base_branch,
        reports=[{"reviewer": r["reviewer"], "verdict": r["verdict"], "report": r["report"]} for r in reports],
        promoted=promoted,
        message=message,
    )
    needs_approval(ctx.ws, ctx.settings, ctx.loop_id, number, {"creator": ctx.req.creator, "message": message})
    gate = approval.wait_decision(ctx.ws, ctx.loop_id)
    ctx.log("decision", round=number, state=gate["state"], by=(gate.get("decision") or {}).get("by"))
    return gate


def _fix_rejected(ctx: LoopRun, number: int, decision: dict[str, Any]) -> list[str]:
    """A person rejected the passed change: the creator gets their note in a fix brief."""
    req = ctx.req
    note, by = str(decision.get("note", "")), str(decision.get("by", ""))
    out = ctx.send(
        Brief(
            req.creator,
            briefs.rejected_brief(ctx.loop_id, number, req.task, note, by, str(ctx.workdir)),
            "loop-fix",
            copy_to=ctx.files.brief(number, req.creator, "fix"),
        )
    )
    _creator_ok(ctx, out, f"fix after the rejection of round {number}")
    ctx.log("fixed", round=number, job=out.job_id, result=out.result[:1000], after="rejected")
    return [briefs.rejected_note(number, note, out.result)]


def _creator_ok(ctx: LoopRun, out: Outcome, what: str) -> None:
    if out.job_id:
        ctx.creator_jobs.append(out.job_id)
    problem = failed(out)
    if problem:
        raise LoopFailed(f"the creator {ctx.req.creator!r} did not finish its {what} job: {problem}")


def _result(
    ctx: LoopRun,
    history: list[RoundOutcome],
    state: LoopState,
    code: int,
    reason: str,
    rebuts: int,
    promoted: list[str],
    decision: dict[str, Any] | None = None,
) -> LoopResult:
    last = history[-1] if history else None
    return LoopResult(
        loop_id=ctx.loop_id,
        state=state,
        exit_code=code,
        reason=reason,
        rounds=len(history),
        reviewers=list(ctx.reviewers),
        final=[r.as_dict() for r in last.reviews] if last else [],
        promoted=promoted,
        snapshot=last.snapshot.identity() if last and last.snapshot else None,
        rebuts_used=rebuts,
        folder=str(ctx.files.root),
        log=str(ctx.files.log),
        history=[h.summary() for h in history],
        approval=decision,
    )
