"""`mam loop`: planner / creator / reviewer rounds over one task (run_loop.sh)."""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Any

import click

from mam.cli.common import App, echo, echo_json, open_registry, workspace_option
from mam.cli.request_options import field_options
from mam.errors import UsageError
from mam.loop import LoopRequest, run_loop
from mam.loop.approval import approve, reject, reject_line
from mam.loop.describe import describe
from mam.loop.model import LoopState
from mam.loop.options import LOOP
from mam.loop.status import all_loops, loop_status
from mam.outcomes import Exit

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
With --approve, a loop whose reviewers all pass does not end: it waits in state
needs_approval (the reviewed base, head and tree, and the passing reports, in `mam loop
status`), notifies (MAM_NOTIFY kind needs_approval), and goes on when a person runs
`mam loop approve ID` (the branch is merged into its base branch; exit 0) or `mam loop
reject ID --note TEXT` (the creator gets the note in a fix brief; another round; after the
last round of --max-loop the loop ends instead, exit 1). An approval that finds the branch moved is refused and the
loop reviews again. The reviewed checkout must be on a branch other than the base branch
(a creator made with `mam session create --worktree` is); the base branch is --base when
it names a branch, else the branch the creator's worktree was made from, else the default
branch.

\b
Commands: `mam loop status [ID]`, `mam loop approve ID`, `mam loop reject ID --note T`.

\b
Exit codes:
  0  every reviewer passed (with --approve: and the change was approved and merged)
  1  not passed after --max-loop rounds (or rejected past it), or a job the loop needs failed
  2  bad options (including --all-reviewer with no running reviewer)
  4  another loop is already running on this checkout (the message names it)
  5  a named session does not exist
"""


@click.group("loop", help=LOOP_HELP, invoke_without_command=True, subcommand_metavar="[status|approve|reject]")
@workspace_option
@field_options(LOOP)
@click.option(
    "--task-file",
    type=click.Path(dir_okay=False, allow_dash=True),
    default=None,
    help="Read the task from a file ('-': stdin).",
)
@click.option("--worktree", "old_worktree", default=None, hidden=True)  # refused: now --worktree-dir
@click.option("--quiet", is_flag=True, help="Do not print progress lines on stderr.")
@click.option("--json", "as_json", is_flag=True, help="Print the summary as JSON.")
@click.pass_context
def loop(
    ctx: click.Context,
    /,
    task_file: str | None,
    old_worktree: str | None,
    quiet: bool,
    as_json: bool,
    **options: Any,
) -> int:

    if ctx.invoked_subcommand is not None:
        return Exit.OK
    app: App = ctx.obj
    if old_worktree is not None:
        raise UsageError("mam loop takes the checkout to review as --worktree-dir DIR (--worktree is not an option)")
    if options["creator"] is None:
        raise UsageError("--creator is required (or run `mam loop status|approve|reject`)")
    task, reviewer = options.pop("task"), options.pop("reviewer")
    if (task is None) == (task_file is None):
        raise UsageError("give exactly one of --task or --task-file")
    text = task if task is not None else _read(task_file or "-")
    req = LoopRequest(
        task=text,
        reviewers=tuple(reviewer.split(",")) if reviewer else (),
        worktree=options.pop("worktree_dir"),
        **options,
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

    head = {
        LoopState.PASSED: f"PASSED in round {result.rounds}",
        LoopState.NOT_PASSED: f"NOT PASSED after {result.rounds} round(s)",
        LoopState.FAILED: "FAILED",
        LoopState.APPROVED: f"APPROVED after round {result.rounds}",
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
    if result.approval and result.approval.get("merged"):
        a = result.approval
        echo(f"  approved by {a['by']} at {a['when']}: merged {a['merged']} into {a['base_branch']}")
    if result.rebuts_used:
        echo(f"  rebuttals used: {result.rebuts_used}")
    echo(f"  log: {result.log}")


@loop.command("status")
@workspace_option
@click.argument("loop_id", required=False)
@click.option("--json", "as_json", is_flag=True, help="Print JSON (one object with LOOP_ID, else a list).")
@click.pass_obj
def status(app: App, loop_id: str | None, as_json: bool) -> None:
    """Every loop's state (running, needs_approval, approved, passed, not_passed, failed), or LOOP_ID's.

    A loop in needs_approval shows the reviewed identity (base, head, tree) and branches.
    Reads files only; starts nothing.

    \b
    Exit codes: 0 shown; 5 no such loop; 2 a malformed LOOP_ID.
    """

    if loop_id is not None:
        one = loop_status(app.ws, loop_id)
        if as_json:
            echo_json(one)
        else:
            _status_lines(one, detail=True)
        return
    rows = all_loops(app.ws)
    if as_json:
        echo_json(rows)
        return
    if not rows:
        echo("no loops")
    for row in rows:
        _status_lines(row, detail=False)


def _status_lines(row: dict[str, Any], *, detail: bool) -> None:
    first = str(row.get("task") or "").splitlines()[0] if row.get("task") else ""
    task = first[:60]  # agent-written text: `echo` strips its control sequences, as every command's
    echo(f"{row['id']}  {row['state']}  round {row['rounds']}  creator {row['creator']}  {task}")
    gate = row.get("approval") or {}
    identity = gate.get("identity") or {}
    if row["state"] == "needs_approval" and identity:
        echo(
            f"  waiting for approval: {gate.get('branch')} into {gate.get('base_branch')}; "
            f"base {identity.get('base')} head {identity.get('head')} tree {identity.get('tree')}"
        )
        echo(f"  approve: mam loop approve {row['id']}   reject: mam loop reject {row['id']} --note TEXT")
    decision = gate.get("decision") or {}
    if decision.get("merged"):
        echo(f"  approved by {decision['by']} at {decision.get('when')}: merged {decision['merged']}")
    if detail:
        for review in row.get("final") or []:
            echo(f"  {review['reviewer']}: {review['verdict']}  {review.get('report') or ''}")
        echo(f"  log: {row['log']}")


@loop.command("approve")
@workspace_option
@click.argument("loop_id")
@click.option(
    "--merge",
    "mode",
    type=click.Choice(["ff", "merge", "squash"]),
    default="ff",
    show_default=True,
    help="How the reviewed head lands on the base branch: fast-forward, a merge commit, or one squashed commit.",
)
@click.option("--json", "as_json", is_flag=True, help="Print the approval gate as JSON.")
@click.pass_obj
def approve_cmd(app: App, loop_id: str, mode: str, as_json: bool) -> None:
    """Approve loop LOOP_ID, waiting in needs_approval: merge its reviewed head into the base branch.

    Only when the branch still holds exactly the reviewed tree; if it changed, nothing is
    merged, the refusal names what changed, and the loop reviews the branch again. Who
    approved, when and the merged commit go into the loop's log and the promoted reports'
    identity sidecars.

    \b
    Exit codes: 0 approved and merged; 5 refused: no such loop, not waiting for approval,
    the branch moved since the review (the loop reviews again), not a fast-forward, a
    conflict, or the base branch's checkout has local changes; 2 bad options.
    """

    gate = approve(app.ws, loop_id, mode=mode, environ=dict(os.environ))
    if as_json:
        echo_json(gate)
        return
    d = gate["decision"]
    echo(f"loop {loop_id}: approved by {d['by']}; {d['message']}")


@loop.command("reject")
@workspace_option
@click.argument("loop_id")
@click.option("--note", required=True, help="What the creator should change; it goes into the creator's fix brief.")
@click.option("--json", "as_json", is_flag=True, help="Print the approval gate as JSON.")
@click.pass_obj
def reject_cmd(app: App, loop_id: str, note: str, as_json: bool) -> None:
    """Reject loop LOOP_ID, waiting in needs_approval: the creator gets NOTE in a fix brief, then another round;
    after the last round of --max-loop the loop ends instead (not passed), as the printed line says.

    \b
    Exit codes: 0 rejected (the loop goes on; after its last round it ends with exit 1);
    5 no such loop, or it is not waiting for approval; 2 an empty --note.
    """

    gate = reject(app.ws, loop_id, note=note)
    if as_json:
        echo_json(gate)
        return
    echo(reject_line({"loop": loop_id, **gate}))
