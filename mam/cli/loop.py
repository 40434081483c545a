"""`mam loop`: planner / creator / reviewer rounds over one task (run_loop.sh)."""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Any

import click

from mam.cli.common import App, echo, echo_json, open_registry, workspace_option
from mam.errors import UsageError
from mam.jobs.outcomes import Exit
from mam.loop import LoopRequest, run_loop
from mam.loop.describe import describe

LOOP_HELP = """Run a task through plan (optional), implement, and review rounds until every reviewer passes.

\b
The creator implements and commits the task (skipped with --review-only). Each round the
reviewers (--reviewer A,B, or --all-reviewer: every running session whose role is reviewer,
except the creator; with neither, the creator reviews its own work) review a snapshot of the
source at the same time, one job each. A report passes only if its last non-empty line is
exactly [VERDICT: PASS]; anything else is NOT PASS, with the reason shown. NOT PASS findings
go to the creator in a fix brief; it fixes them or answers [REBUT: ...] (at most --max-rebut
times in the whole loop; past that a rebuttal counts as a refusal to fix). In a git checkout
each round reviews base..head plus uncommitted files, named by a tree hash; if the source
changes during a round, the round's approvals are discarded and it is reviewed again (at most
--max-repeats times, then the loop fails). Passing reports are promoted to
.agents/reports/<task-slug>/ with identity sidecars. Everything the loop did is kept in
.mam/loops/<loop-id>/ (loop.jsonl, briefs, reports).

\b
Exit codes:
  0  every reviewer passed
  1  not passed after --max-loop rounds, or a job the loop needs failed
  2  bad options (including --all-reviewer with no running reviewer)
  4  another loop is already running on this checkout (the message names it)
  5  a named session does not exist
"""


@click.command("loop", help=LOOP_HELP)
@workspace_option
@click.option("--creator", required=True, help="Session that implements the task and fixes findings.")
@click.option("--reviewer", "reviewer", default=None, metavar="A,B", help="Reviewer sessions, comma-separated.")
@click.option("--all-reviewer", is_flag=True, help="Every running session whose role is reviewer, except the creator.")
@click.option("--task", default=None, help="The task, given verbatim to the creator.")
@click.option(
    "--task-file",
    type=click.Path(dir_okay=False, allow_dash=True),
    default=None,
    help="Read the task from a file ('-': stdin).",
)
@click.option("--planner", default=None, help="Session that writes the plan first (implies --plan).")
@click.option("--plan", "plan", is_flag=True, help="Plan before implementing (without --planner the creator plans).")
@click.option(
    "--plan-talk", type=int, default=2, show_default=True, help="Turns the creator may challenge the planner's plan."
)
@click.option(
    "--max-loop", type=int, default=3, show_default=True, help=f"Review rounds before giving up (exit {Exit.FAILED})."
)
@click.option(
    "--max-rebut", type=int, default=1, show_default=True, help="[REBUT: ...] answers accepted in the whole loop."
)
@click.option("--review-only", is_flag=True, help="Skip the implementation: review work done outside the loop.")
@click.option(
    "--worktree",
    default=None,
    metavar="DIR",
    help="Checkout to review (default: the creator's folder, else the workspace).",
)
@click.option(
    "--base",
    default=None,
    metavar="REV",
    help="Base of the reviewed change (default: merge-base of HEAD with the default branch).",
)
@click.option(
    "--timeout", type=float, default=None, help="Wall-clock budget of each job, seconds (default MAM_JOB_TIMEOUT_S)."
)
@click.option(
    "--start-deadline",
    type=float,
    default=None,
    help="Seconds each agent has to start its job (default MAM_START_DEADLINE_S).",
)
@click.option(
    "--heartbeat", type=float, default=None, help="Heartbeat interval asked of each agent (default MAM_HEARTBEAT_S)."
)
@click.option(
    "--dispatch-wait",
    type=float,
    default=None,
    help="Seconds a job waits for its session's earlier jobs (default MAM_DISPATCH_WAIT_S).",
)
@click.option(
    "--subjob-wait",
    type=float,
    default=None,
    help="Cap on waiting for the creator's sub-jobs before a review (default MAM_JOB_TIMEOUT_S).",
)
@click.option(
    "--max-repeats",
    type=int,
    default=3,
    show_default=True,
    help="Times a round is reviewed again because the source changed during it, before the loop fails.",
)
@click.option("--slug", default=None, help="Folder name under .agents/reports/ (default: from the task).")
@click.option(
    "--loop-id", default=None, help="Name the loop (default: a new loop-<time>-<hex> id); refused if it exists."
)
@click.option("--quiet", is_flag=True, help="Do not print progress lines on stderr.")
@click.option("--json", "as_json", is_flag=True, help="Print the summary as JSON.")
@click.pass_obj
def loop(
    app: App,
    creator: str,
    reviewer: str | None,
    all_reviewer: bool,
    task: str | None,
    task_file: str | None,
    planner: str | None,
    plan: bool,
    plan_talk: int,
    max_loop: int,
    max_rebut: int,
    review_only: bool,
    worktree: str | None,
    base: str | None,
    timeout: float | None,
    start_deadline: float | None,
    heartbeat: float | None,
    dispatch_wait: float | None,
    subjob_wait: float | None,
    max_repeats: int,
    slug: str | None,
    loop_id: str | None,
    quiet: bool,
    as_json: bool,
) -> int:

    if (task is None) == (task_file is None):
        raise UsageError("give exactly one of --task or --task-file")
    text = task if task is not None else _read(task_file or "-")
    req = LoopRequest(
        creator=creator,
        task=text,
        reviewers=tuple((reviewer or "").split(",")) if reviewer else (),
        all_reviewer=all_reviewer,
        planner=planner,
        plan=plan,
        plan_talk=plan_talk,
        max_loop=max_loop,
        max_rebut=max_rebut,
        review_only=review_only,
        worktree=worktree,
        base=base,
        timeout_s=timeout,
        start_deadline_s=start_deadline,
        heartbeat_s=heartbeat,
        dispatch_wait_s=dispatch_wait,
        subjob_wait_s=subjob_wait,
        max_repeats=max_repeats,
        slug=slug,
        loop_id=loop_id,
    )
    result = run_loop(
        req,
        ws=app.ws,
        settings=app.settings,
        registry=open_registry(app),
        on_event=None if quiet else _progress,
        environ=dict(os.environ),
    )
    if as_json:
        echo_json(result.as_dict())
    else:
        _summary(result)
    return result.exit_code


def _read(path: str) -> str:

    if path == "-":
        return sys.stdin.read()
    try:
        return Path(path).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as e:
        raise UsageError(f"cannot read the task file {path}: {e}") from e


def _progress(event: dict[str, Any]) -> None:

    text = describe(event)
    if text and event["event"] != "end":
        echo(f"loop: {text}", err=True)


def _summary(result: Any) -> None:
    from mam.loop.model import LoopState

    head = {
        LoopState.PASSED: f"PASSED in round {result.rounds}",
        LoopState.NOT_PASSED: f"NOT PASSED after {result.rounds} round(s)",
        LoopState.FAILED: "FAILED",
    }[result.state]
    echo(f"loop {result.loop_id}: {head}: {result.reason}")
    for review in result.final:
        why = f" ({review['reason']})" if review["verdict"] != "PASS" else ""
        echo(f"  {review['reviewer']}: {review['verdict']}{why}  {review['report']}")
    snap = result.snapshot
    if snap:
        echo(f"  reviewed: base {snap['base']} head {snap['head']} tree {snap['tree']}")
    for path in result.promoted:
        echo(f"  promoted: {path}")
    if result.rebuts_used:
        echo(f"  rebuttals used: {result.rebuts_used}")
    echo(f"  log: {result.log}")
