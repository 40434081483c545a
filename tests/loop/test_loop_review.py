"""The review loop end to end: demo agents in real panes, the real CLI, a git workspace."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.helpers.jobs import create_demo
from tests.loop.gitrepo import expected_tree, git
from tests.loop.helpers import events, log_events, run_loop

TASK = "demo-write: feature.txt :: the feature\ndemo-commit: add the feature"


@pytest.mark.real_brokers  # the job path on amqtt and Mosquitto, not only the double
def test_smoke_self_review_on_both_brokers(loop_ws_any):
    """With neither --reviewer nor --all-reviewer the creator reviews its own work."""
    ws = loop_ws_any
    create_demo("creator")
    code, summary, proc = run_loop("--creator", "creator", "--task", TASK)
    assert code == 0, proc.stderr
    assert summary["state"] == "passed" and summary["rounds"] == 1 and summary["reviewers"] == ["creator"]
    assert (ws.root / "feature.txt").read_text() == "the feature\n"
    assert git(ws.root, "log", "-1", "--format=%s") == "add the feature"
    start = events(log_events(ws), "start")[0]
    assert start["chosen_by"].startswith("self-review")
    brief = (Path(summary["folder"]) / "round-1" / "brief-review-creator.md").read_text()
    assert "review your own work" in brief
    # The task is quoted for reviewers (`> demo-write: ...`), never given to them as instructions.
    assert "> demo-write: feature.txt" in brief
    assert not any(line.lstrip().startswith("demo-") for line in brief.splitlines())
    promoted = Path(summary["promoted"][0])
    assert promoted.parent.parent == ws.root / ".agents" / "reports"


def test_two_reviewers_one_not_pass_then_both_pass(loop_ws):
    ws = loop_ws
    create_demo("creator")
    create_demo("rev-a", role="reviewer", env={"MAM_DEMO_VERDICTS": "NOT PASS,PASS"})
    create_demo("rev-b", role="reviewer", env={"MAM_DEMO_VERDICTS": "PASS"})
    base = git(ws.root, "rev-parse", "HEAD")
    code, summary, proc = run_loop(
        "--creator", "creator", "--reviewer", "rev-a,rev-b", "--task", TASK, "--max-loop", "3"
    )
    assert code == 0, proc.stderr
    assert summary["state"] == "passed" and summary["rounds"] == 2
    first = summary["history"][0]["reviews"]
    assert [(r["reviewer"], r["verdict"]) for r in first] == [("rev-a", "NOT PASS"), ("rev-b", "PASS")]
    # The creator was fed rev-a's findings and applied them (the demo's findings are fix directives).
    assert "fix for review 1" in (ws.root / "DEMO_FIXES.md").read_text()
    fix = (Path(summary["folder"]) / "round-1" / "brief-fix-creator.md").read_text()
    assert fix.splitlines()[0] == "[mam-loop: fix]" and "demo finding 1" in fix
    head = git(ws.root, "rev-parse", "HEAD")
    tree = expected_tree(ws.root)
    assert (
        summary["snapshot"]["tree"] == tree
        and summary["snapshot"]["head"] == head
        and summary["snapshot"]["base"] == base
    )
    folder = ws.root / ".agents" / "reports" / "demo-write-feature-txt-the-feature-demo-commit-a"
    assert sorted(p.name for p in folder.iterdir()) == [
        "report-rev-a.identity.json",
        "report-rev-a.md",
        "report-rev-b.identity.json",
        "report-rev-b.md",
    ]
    for reviewer in ("rev-a", "rev-b"):
        identity = json.loads((folder / f"report-{reviewer}.identity.json").read_text())
        assert identity["tree"] == tree and identity["head"] == head and identity["base"] == base
        assert identity["reviewer"] == reviewer and identity["verdict"] == "PASS" and identity["round"] == 2
        assert identity["time"] and identity["loop"] == summary["loop_id"]
        assert (folder / f"report-{reviewer}.md").read_text().rstrip().endswith("[VERDICT: PASS]")
        brief = (Path(summary["folder"]) / "round-2" / f"brief-review-{reviewer}.md").read_text()
        assert f"tree: {tree}" in brief and f"base: {base}" in brief and f"head: {head}" in brief
        assert f"Report file: {Path(summary['folder']) / 'round-2' / f'report-{reviewer}.md'}" in brief
    # Round 1's reports are kept next to round 2's.
    assert (
        (Path(summary["folder"]) / "round-1" / "report-rev-a.md").read_text().rstrip().endswith("[VERDICT: NOT PASS]")
    )
    log = log_events(ws)
    assert [e["event"] for e in log][0] == "start" and log[-1]["event"] == "end"
    assert events(log, "fixed")[0]["round"] == 1


def test_the_source_changing_during_a_round_discards_its_approvals(loop_ws):
    ws = loop_ws
    touched = ws.root / "touched.txt"
    create_demo("creator")
    create_demo("rev-a", role="reviewer", env={"MAM_DEMO_REVIEW_TOUCH": str(touched)})
    create_demo("rev-b", role="reviewer")
    code, summary, proc = run_loop("--creator", "creator", "--reviewer", "rev-a,rev-b", "--task", TASK)
    assert code == 0, proc.stderr
    assert summary["rounds"] == 1 and summary["history"][0]["repeats"] == 1
    log = log_events(ws)
    discarded = events(log, "discarded")
    assert len(discarded) == 1 and discarded[0]["round"] == 1
    assert sorted(discarded[0]["approvals"]) == ["rev-a", "rev-b"]
    assert "approvals are discarded" in discarded[0]["message"]
    assert discarded[0]["before"]["tree"] != discarded[0]["after"]["tree"]
    snapshots = events(log, "snapshot")
    assert [s["attempt"] for s in snapshots] == [1, 2]
    kept = Path(discarded[0]["moved_to"])
    assert sorted(p.name for p in kept.glob("report-*.md")) == ["report-rev-a.md", "report-rev-b.md"]
    # The kept attempt reviewed the source with the change in it.
    assert summary["snapshot"]["tree"] == expected_tree(ws.root) == discarded[0]["after"]["tree"]
    assert "changed during review" in touched.read_text()
    assert "approvals are discarded" in proc.stderr


def test_a_loop_outside_git_reviews_without_identity(wired_mosquitto):
    ws = wired_mosquitto
    create_demo("creator")
    code, summary, proc = run_loop("--creator", "creator", "--task", "demo-write: x.txt :: x")
    assert code == 0, proc.stderr
    assert summary["snapshot"] is None
    start = events(log_events(ws), "start")[0]
    assert start["identity"] is False and "is a git checkout" in start["no_identity"]
    assert "no snapshot identity" in proc.stderr
    brief = (Path(summary["folder"]) / "round-1" / "brief-review-creator.md").read_text()
    assert "no snapshot identity" in brief
    sidecar = Path(summary["promoted"][0]).with_suffix(".identity.json")
    assert json.loads(sidecar.read_text())["tree"] is None


def test_the_library_call_mam_demo_makes(loop_ws):
    """run_loop in-process, as `mam demo` calls it: two demo reviewers, one NOT PASS in round 1,
    both PASS in round 2."""
    import os

    from mam.loop import LoopRequest, run_loop
    from mam.settings import load_settings
    from mam.store.registry import Registry

    ws = loop_ws
    create_demo("demo-creator", role="developer")
    create_demo("demo-reviewer-1", role="reviewer", env={"MAM_DEMO_VERDICTS": "NOT PASS,PASS"})
    create_demo("demo-reviewer-2", role="reviewer", env={"MAM_DEMO_VERDICTS": "PASS"})
    seen: list[dict] = []
    req = LoopRequest(
        creator="demo-creator",
        reviewers=("demo-reviewer-1", "demo-reviewer-2"),
        max_loop=2,
        task="demo-write: hello.txt :: hello from the demo\ndemo-commit: add hello.txt",
        start_deadline_s=15,
        heartbeat_s=0.5,
    )
    registry = Registry(ws)
    try:
        result = run_loop(
            req,
            ws=ws,
            settings=load_settings(env_file=ws.env_file),
            registry=registry,
            on_event=seen.append,
            environ=dict(os.environ),
        )
    finally:
        registry.close()
    assert result.passed and result.exit_code == 0 and result.rounds == 2
    assert [r["verdict"] for r in result.history[0]["reviews"]] == ["NOT PASS", "PASS"]
    assert len(result.promoted) == 2 and result.snapshot and result.snapshot["tree"] == expected_tree(ws.root)
    assert [e["event"] for e in seen if e["event"] in ("verdict", "fixed", "passed")] == [
        "verdict",
        "verdict",
        "fixed",
        "verdict",
        "verdict",
        "passed",
    ]


def test_demo_loop_for_mam_demo(loop_ws):
    """mam.demo.loop.demo_loop, the part `mam demo` runs: it adds two demo reviewers and passes in round 2."""
    import os

    from mam.demo.loop import demo_loop
    from mam.settings import load_settings
    from mam.store.registry import Registry

    create_demo("creator")
    lines: list[str] = []
    registry = Registry(loop_ws)
    try:
        out = demo_loop(
            ws=loop_ws,
            settings=load_settings(env_file=loop_ws.env_file),
            registry=registry,
            environ=dict(os.environ),
            say=lines.append,
        )
    finally:
        registry.close()
    assert out["exit_code"] == 0 and out["rounds"] == 2, lines
    assert "round 1: reviewer-1 NOT PASS, reviewer-2 PASS" in str(out["summary"])
    assert any("round 1: reviewer-1: NOT PASS" in line for line in lines)
    assert (loop_ws.root / ".agents" / "reports" / "demo-goodbye" / "report-reviewer-2.identity.json").exists()


def test_a_source_that_never_holds_still_fails_the_loop_clearly(loop_ws):
    touched = loop_ws.root / "touched.txt"
    create_demo("creator")
    create_demo("rev", role="reviewer", env={"MAM_DEMO_REVIEW_TOUCH": str(touched)})
    code, summary, proc = run_loop("--creator", "creator", "--reviewer", "rev", "--task", TASK, "--max-repeats", "0")
    assert code == 1, proc.stderr
    assert summary["state"] == "failed" and "kept changing during round 1" in summary["reason"]
    assert len(events(log_events(loop_ws), "discarded")) == 1
    assert summary["promoted"] == []
