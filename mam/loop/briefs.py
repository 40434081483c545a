"""The texts the loop sends: plan, challenge, answer, create, review and fix briefs.

Material an agent should read but not act on as instructions addressed to it (the task in
a review brief, a plan under challenge, a rebuttal) is quoted with `> `. The task is given
verbatim only to the creator, and the findings verbatim only in the fix brief.
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Sequence
from pathlib import Path

from mam.loop.reports import Review
from mam.loop.snapshot import Snapshot
from mam.loop.subjobs import SubJob
from mam.loop.verdict import NOT_PASS_TOKEN, PASS_TOKEN

PLAN_OK = "[PLAN OK]"
MAX_EMBED = 48_000  # characters of one embedded report or plan
_CONTROL = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f]")


def clean(text: str, limit: int = MAX_EMBED) -> str:
    text = _CONTROL.sub("?", text.strip())
    return text if len(text) <= limit else text[:limit] + f"\n[... cut at {limit} characters]"


def quote(text: str) -> str:
    return "\n".join(f"> {line}" if line.strip() else ">" for line in clean(text).splitlines()) or ">"


def _head(kind: str, loop_id: str, extra: str = "") -> list[str]:
    return [f"[mam-loop: {kind}]", f"Loop {loop_id}{', ' + extra if extra else ''}.", ""]


def plan_brief(loop_id: str, task: str, plan_file: Path, workdir: str) -> str:
    return "\n".join(
        [
            *_head("plan", loop_id),
            "Write an implementation plan for this task (the task is quoted; do not implement it):",
            "",
            quote(task),
            "",
            f"The code is in {workdir}. Keep the plan short: steps, files to touch, how to test.",
            "Write the plan in Markdown to the file below, then complete the job.",
            "",
            f"Plan file: {plan_file}",
        ]
    )


def challenge_brief(loop_id: str, task: str, plan: str, turn: int, turns: int) -> str:
    return "\n".join(
        [
            *_head("challenge", loop_id, f"turn {turn} of {turns}"),
            "You will implement the task below. Before you do, challenge the plan a planner wrote for it.",
            "",
            "Task:",
            "",
            quote(task),
            "",
            "Plan:",
            "",
            quote(plan),
            "",
            f"If the plan is good as it is, complete the job with the message {PLAN_OK}.",
            "Otherwise complete it with your challenge as the message (for a longer one, write it to a file and add "
            "--report",
            "and that file's path to the completed command).",
            "Do not start implementing yet.",
        ]
    )


def answer_brief(loop_id: str, task: str, challenge: str, plan_file: Path, turn: int) -> str:
    return "\n".join(
        [
            *_head("plan-answer", loop_id, f"turn {turn}"),
            "The creator challenged your plan for this task:",
            "",
            quote(task),
            "",
            "Its challenge:",
            "",
            quote(challenge),
            "",
            "Answer it by revising the plan file in place (or keep the plan and add a short note why), then complete "
            "the job.",
            "",
            f"Plan file: {plan_file}",
        ]
    )


def create_brief(loop_id: str, task: str, plan: str, workdir: str) -> str:
    parts = [*_head("create", loop_id), "Implement this task:", "", task.strip(), ""]
    if plan:
        parts += ["Follow this plan (agreed with the planner):", "", clean(plan), ""]
    parts += [
        f"Work in {workdir} and commit your work there when it is done.",
        "If you delegate part of the work to another session, add --parent-job followed by your own job id (it is in "
        "the",
        "footer below) to that delegate command: the review waits for those jobs and shows their outcome to the "
        "reviewers.",
        "When you are done, complete the job with a one-line summary of the change.",
    ]
    return "\n".join(parts)


def identity_lines(snapshot: Snapshot | None, no_identity: str) -> list[str]:
    if snapshot is None:
        return [f"Source: no snapshot identity ({no_identity}); review the current state of the code."]
    return [
        "Review exactly this snapshot (it includes uncommitted and untracked files):",
        f"  repository: {snapshot.repo}",
        f"  base: {snapshot.base}",
        f"  head: {snapshot.head or '(no commit yet)'}",
        f"  tree: {snapshot.tree}",
        "See the change with:",
        f"  {shlex.join(['git', '-C', str(snapshot.repo), 'diff', snapshot.base, snapshot.tree])}",
        "Do not change any file in that checkout while you review: a change discards this round's approvals.",
    ]


def review_brief(
    loop_id: str,
    round_number: int,
    task: str,
    *,
    snapshot: Snapshot | None,
    no_identity: str,
    subjobs: Sequence[SubJob],
    notes: Sequence[str],
    report_file: Path,
    self_review: bool,
) -> str:
    parts = [*_head("review", loop_id, f"round {round_number}")]
    if self_review:
        parts += ["No other reviewer was chosen: review your own work as strictly as a stranger would.", ""]
    parts += [
        "Review the change made for this task (quoted):",
        "",
        quote(task),
        "",
        *identity_lines(snapshot, no_identity),
        "",
    ]
    if subjobs:
        parts += ["The creator delegated part of the work; these sub-jobs ended as follows:", ""]
        parts += [f"- {s.line()}" for s in subjobs] + [""]
    for note in notes:
        parts += [note, ""]
    parts += [
        "Write your review in Markdown to the report file below: findings first, each one concrete enough to act on.",
        "The last non-empty line of the report must be exactly one of these two lines, alone, nothing else on it:",
        f"  {PASS_TOKEN}",
        f"  {NOT_PASS_TOKEN}",
        "Anything else (no verdict, a verdict inside a sentence, two verdicts, other spelling) counts as NOT PASS.",
        "Then complete the job (you may attach the report with --report).",
        "",
        f"Report file: {report_file}",
    ]
    return "\n".join(parts)


def fix_brief(
    loop_id: str, round_number: int, task: str, failing: Sequence[Review], rebuts_left: int, workdir: str
) -> str:
    parts = [
        *_head("fix", loop_id, f"round {round_number}"),
        f"The reviewers did not pass round {round_number} of your work on this task (quoted):",
        "",
        quote(task),
        "",
        "Their findings:",
        "",
    ]
    for review in failing:
        why = "NOT PASS" if review.verdict.wellformed else f"counted as NOT PASS: {review.verdict.reason}"
        parts += [
            f"----- report of {review.reviewer} ({why}) -----",
            clean(review.report_text) or "(empty report)",
            f"----- end of the report of {review.reviewer} -----",
            "",
        ]
    parts += [f"Fix the findings in {workdir} and commit, then complete the job with a one-line summary of the fix."]
    if rebuts_left > 0:
        parts += [
            "If you are sure a finding is wrong, change nothing and complete the job with the message",
            f"[REBUT: your reasons] instead; the reviewers will see it next round ({rebuts_left} rebuttal(s) left).",
        ]
    else:
        parts += ["No rebuttals are left: a [REBUT: ...] answer now counts as a refusal to fix."]
    return "\n".join(parts)


def rebut_note(round_number: int, text: str, used: int, limit: int) -> str:
    return (
        f"The creator did not change the code after round {round_number}; it rebutted the findings "
        f"(rebuttal {used} of {limit}). Weigh its reasons:\n\n{quote(text)}"
    )


def refusal_note(round_number: int, text: str) -> str:
    return (
        f"The creator refused to fix the findings of round {round_number}: it answered with a rebuttal after "
        f"the rebuttal limit was reached, which counts as a refusal. Its answer:\n\n{quote(text)}"
    )


def fixed_note(round_number: int, result: str) -> str:
    return f"The creator says it fixed the findings of round {round_number}:\n\n{quote(result or '(no summary)')}"


def rejected_brief(loop_id: str, round_number: int, task: str, note: str, by: str, workdir: str) -> str:
    """The creator's fix brief after a person rejected a change every reviewer had passed."""
    return "\n".join(
        [
            *_head("fix", loop_id, f"round {round_number}"),
            f"Every reviewer passed round {round_number} of your work on this task (quoted), but the person asked "
            f"to approve it ({by}) rejected it:",
            "",
            quote(task),
            "",
            f"----- note of {by} -----",
            clean(note),
            f"----- end of the note of {by} -----",
            "",
            f"Make the change the note asks for in {workdir} and commit, then complete the job with a one-line "
            "summary of what you changed.",
        ]
    )


def rejected_note(round_number: int, note: str, result: str) -> str:
    return (
        f"A person rejected the change after round {round_number} with this note:\n\n{quote(note)}\n\n"
        f"The creator says it made the change:\n\n{quote(result or '(no summary)')}"
    )


def review_again_note(round_number: int, why: str) -> str:
    return (
        f"Round {round_number} passed, but an approval found the branch changed since that review ({why}). "
        "Review the source as it is now."
    )
