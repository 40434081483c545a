"""Loop rules end to end: strict verdicts, --max-loop, rebuttals, reviewer selection, planning."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.helpers.jobs import create_demo
from tests.helpers.mamcli import mam
from tests.loop.helpers import events, log_events, run_loop

TASK = "demo-write: feature.txt :: the feature\ndemo-commit: add the feature"


@pytest.mark.parametrize(
    "verdict, why",
    [
        ("none", "no verdict line"),
        ("inline", "inline in a sentence"),
        ("lower", "malformed verdict line '[verdict: pass]'"),
        ("double", "2 verdict lines"),
    ],
)
def test_a_missing_or_malformed_verdict_is_not_pass_with_the_reason_shown(loop_ws, verdict: str, why: str):
    create_demo("creator")
    create_demo("rev", role="reviewer", env={"MAM_DEMO_VERDICTS": verdict})
    proc = mam(
        "loop",
        "--creator",
        "creator",
        "--reviewer",
        "rev",
        "--task",
        TASK,
        "--review-only",
        "--max-loop",
        "1",
        "--start-deadline",
        "15",
        "--heartbeat",
        "0.5",
        timeout=120,
    )
    assert proc.returncode == 1, proc.stderr
    assert "NOT PASSED after 1 round" in proc.stdout
    line = next(x for x in proc.stdout.splitlines() if x.strip().startswith("rev: NOT PASS ("))
    assert why in line  # the summary shows why
    assert why in proc.stderr  # and so does the progress on stderr
    verdicts = events(log_events(loop_ws), "verdict")
    assert len(verdicts) == 1 and verdicts[0]["verdict"] == "NOT PASS" and why in verdicts[0]["reason"]
    assert verdicts[0]["wellformed"] is False
    assert not (loop_ws.root / ".agents" / "reports").exists()  # nothing promoted


def test_max_loop_reached_with_bounded_rebuttals(loop_ws):
    ws = loop_ws
    create_demo("creator", env={"MAM_DEMO_REBUT": "the finding is wrong: x is intended"})
    create_demo("rev", role="reviewer", env={"MAM_DEMO_VERDICTS": "NOT PASS"})
    code, summary, proc = run_loop(
        "--creator", "creator", "--reviewer", "rev", "--task", TASK, "--max-loop", "3", "--max-rebut", "1"
    )
    assert code == 1, proc.stderr
    assert summary["state"] == "not_passed" and summary["rounds"] == 3 and summary["rebuts_used"] == 1
    assert summary["promoted"] == []
    rebuts = events(log_events(ws), "rebut")
    assert [(r["round"], r["accepted"]) for r in rebuts] == [(1, True), (2, False)]
    assert "refusal" in rebuts[1]["message"]
    folder = Path(summary["folder"])
    # The accepted rebuttal is shown to the reviewers of the next round...
    round2 = (folder / "round-2" / "brief-review-rev.md").read_text()
    assert "> the finding is wrong: x is intended" in round2 and "rebuttal 1 of 1" in round2
    # ...the one past --max-rebut is shown as a refusal to fix.
    round3 = (folder / "round-3" / "brief-review-rev.md").read_text()
    assert "refused to fix" in round3
    fix2 = (folder / "round-2" / "brief-fix-creator.md").read_text()
    assert "No rebuttals are left" in fix2
    assert not (ws.root / "DEMO_FIXES.md").exists()  # the creator never fixed anything
    assert len(list(folder.glob("round-3/brief-fix-*"))) == 0  # no fix is asked after the last round


def test_max_loop_reached_while_fixing_exits_1(loop_ws):
    create_demo("creator")
    create_demo("rev", role="reviewer", env={"MAM_DEMO_VERDICTS": "NOT PASS"})
    code, summary, proc = run_loop("--creator", "creator", "--reviewer", "rev", "--task", TASK, "--max-loop", "2")
    assert code == 1 and summary["rounds"] == 2 and summary["rebuts_used"] == 0
    assert "not every reviewer passed after 2 round(s)" in summary["reason"]
    assert (loop_ws.root / "DEMO_FIXES.md").read_text() == "fix for review 1\n"


def test_all_reviewer_picks_running_reviewers_except_the_creator(loop_ws):
    create_demo("creator", role="Reviewer")  # a reviewer by role, but it is the creator
    create_demo("rev-1", role="reviewer")
    create_demo("rev-2", role="REVIEWER")
    create_demo("dev", role="developer")
    create_demo("rev-stopped", role="reviewer")
    mam("session", "stop", "--session", "rev-stopped", check=True)
    code, summary, proc = run_loop(
        "--creator", "creator", "--all-reviewer", "--task", TASK, "--review-only", "--max-loop", "1"
    )
    assert code == 0, proc.stderr
    assert summary["reviewers"] == ["rev-1", "rev-2"]
    assert [r["reviewer"] for r in summary["final"]] == ["rev-1", "rev-2"]
    assert events(log_events(loop_ws), "start")[0]["chosen_by"] == "every running session whose role is reviewer"
    assert not (loop_ws.root / "feature.txt").exists()  # --review-only: the creator was never asked to implement


def test_bad_selections_are_refused_before_anything_runs(loop_ws):
    create_demo("creator")
    code, _, proc = run_loop("--creator", "creator", "--all-reviewer", "--task", TASK)
    assert code == 2 and "no running session has the role 'reviewer'" in proc.stderr
    code, _, proc = run_loop("--creator", "creator", "--reviewer", "ghost", "--task", TASK)
    assert code == 5 and "ghost" in proc.stderr
    code, _, proc = run_loop("--creator", "nobody", "--task", TASK)
    assert code == 5
    code, _, proc = run_loop("--creator", "creator", "--task", TASK, "--max-loop", "0")
    assert code == 2
    code, _, proc = run_loop("--creator", "creator", "--task", TASK, "--base", "no-such-rev")
    assert code == 2 and "--base 'no-such-rev' is not a commit" in proc.stderr
    assert not (loop_ws.state / "loops").exists()


def test_planner_and_creator_talk_then_the_plan_goes_to_the_creator(loop_ws):
    create_demo("creator")
    create_demo("planner", role="planner")
    code, summary, proc = run_loop("--creator", "creator", "--planner", "planner", "--plan-talk", "3", "--task", TASK)
    assert code == 0, proc.stderr
    log = log_events(loop_ws)
    assert [e["event"] for e in log if e["event"].startswith("plan")] == [
        "plan",
        "plan-challenge",
        "plan-answer",
        "plan-accepted",
    ]
    folder = Path(summary["folder"])
    plan = (folder / "plan.md").read_text()
    assert "Revision 1" in plan
    create = (folder / "brief-create.md").read_text()
    assert "Revision 1" in create and "demo-write: feature.txt :: the feature" in create  # plan and verbatim task
    assert "demo challenge 1" in (folder / "brief-plan-answer-1.md").read_text()
    assert (loop_ws.root / "feature.txt").exists()
