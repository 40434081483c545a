"""`mam loop`'s options, declared once: the CLI's options (mam/cli/loop.py) and the MCP tool loop_start's
parameters (mam/mcp/server.py; the tool runs `mam loop` with each given one by its flag) are made from
`LOOP`. Their values become a mam.loop.model.LoopRequest (`reviewer` as the tuple `reviewers`, `worktree_dir`
as `worktree`). `mcp=False`: the command line's only. `--task-file`, `--quiet` and `--json` stay the
command's own (where the task is read from, what is printed)."""

from __future__ import annotations

from mam.outcomes import Exit
from mam.protocol import Field

LOOP: tuple[Field, ...] = (
    Field("creator", str, "Session that implements the task and fixes findings (required)", flag="--creator"),
    Field("reviewer", str, "Reviewer sessions, comma-separated", flag="--reviewer", metavar="A,B"),
    Field(
        "all_reviewer", bool, "Every running session whose role is reviewer, except the creator", flag="--all-reviewer"
    ),
    Field("task", str, "The task, given verbatim to the creator", flag="--task"),
    Field("planner", str, "Session that writes the plan first (implies --plan)", flag="--planner"),
    Field("plan", bool, "Plan before implementing (without --planner the creator plans)", flag="--plan"),
    Field(
        "plan_talk", int, "Turns the creator may challenge the planner's plan", flag="--plan-talk", value=2, default="2"
    ),
    Field(
        "max_loop",
        int,
        f"Review rounds before giving up (exit {Exit.FAILED})",
        flag="--max-loop",
        value=3,
        default="3",
    ),
    Field(
        "max_rebut", int, "[REBUT: ...] answers accepted in the whole loop", flag="--max-rebut", value=1, default="1"
    ),
    Field("review_only", bool, "Skip the implementation: review work done outside the loop", flag="--review-only"),
    Field(
        "worktree_dir",
        str,
        "Checkout to review",
        flag="--worktree-dir",
        metavar="DIR",
        default="the creator's folder, else the workspace",
    ),
    Field(
        "base",
        str,
        "Base of the reviewed change",
        flag="--base",
        metavar="REV",
        default="merge-base of HEAD with the default branch",
    ),
    Field("timeout_s", float, "Wall-clock budget of each job, seconds", flag="--timeout", default="MAM_JOB_TIMEOUT_S"),
    Field(
        "start_deadline_s",
        float,
        "Seconds each agent has to start its job",
        flag="--start-deadline",
        default="MAM_START_DEADLINE_S",
    ),
    Field(
        "heartbeat_s", float, "Heartbeat interval asked of each agent", flag="--heartbeat", default="MAM_HEARTBEAT_S"
    ),
    Field(
        "dispatch_wait_s",
        float,
        "Seconds a job waits for its session's earlier jobs",
        flag="--dispatch-wait",
        default="MAM_DISPATCH_WAIT_S",
        least=0,
    ),
    Field(
        "subjob_wait_s",
        float,
        "Cap on waiting for the creator's sub-jobs before a review",
        flag="--subjob-wait",
        default="MAM_JOB_TIMEOUT_S",
    ),
    Field(
        "max_repeats",
        int,
        "Times a round is reviewed again because the source changed during it, before the loop fails",
        flag="--max-repeats",
        value=3,
        default="3",
    ),
    Field("slug", str, "Folder name under .agents/reports/", flag="--slug", default="from the task"),
    Field(
        "loop_id",
        str,
        "Name the loop; refused if it exists",
        flag="--loop-id",
        mcp=False,
        default="a new loop-<time>-<hex> id",
    ),
    Field(
        "approve",
        bool,
        "When every reviewer passes, wait in state needs_approval for `mam loop approve|reject`",
        flag="--approve",
    ),
)
