"""Sub-jobs of the creator, one loop per checkout, and a loop on an issue worktree."""

from __future__ import annotations

import json
import os
from pathlib import Path

from tests.helpers.jobs import create_demo
from tests.helpers.mamcli import MAM, mam, spawn_mam
from tests.loop.gitrepo import expected_tree, git
from tests.loop.helpers import FAST_JOB, events, log_events, run_loop

REPO = Path(__file__).resolve().parents[2]
RUN_LOOP = REPO / "skills" / "multi-agent-mux-loop" / "scripts" / "run_loop.sh"


def _jobs_of(session: str) -> list[dict[str, object]]:
    return list(json.loads(mam("job", "list", "--session", session, "--json").stdout or "[]"))


def running_job(session: str) -> str:
    return next((str(j["id"]) for j in _jobs_of(session) if j["state"] == "running"), "")


def finish(proc, timeout: float = 150):
    try:
        out, err = proc.communicate(timeout=timeout)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    return proc.returncode, out, err


def test_the_review_waits_for_the_creators_sub_jobs_and_shows_them(loop_ws, poll):
    create_demo("creator")
    create_demo("helper", behaviour="slow", env={"MAM_DEMO_SLEEP_S": "5"})
    create_demo("rev", role="reviewer")
    # The creator's turn goes on until its sub-job is registered (demo-await), however slow the machine: with a
    # fixed `demo-sleep: 3` a loaded machine could end it before the test saw it run or delegated the sub-job.
    go = loop_ws.root / "go"
    task = f"demo-await: {go}\n" + "demo-write: feature.txt :: the feature\ndemo-commit: add the feature"
    loop = spawn_mam("loop", "--json", *FAST_JOB, "--creator", "creator", "--reviewer", "rev", "--task", task)
    sub = None
    try:
        creator_job = poll(lambda: running_job("creator"), timeout=120, message="the creator's job never started")
        # The creator delegates part of its work (as an agent would, with --parent-job <its job id>).
        sub = spawn_mam(
            "job",
            "delegate",
            "--target",
            "helper",
            "--brief",
            "the helper's part",
            "--parent-job",
            creator_job,
            "--start-deadline",
            "15",
            "--heartbeat",
            "0.5",
            "--json",
        )
        poll(lambda: _jobs_of("helper"), timeout=120, message="the sub-job was never registered")
        go.touch()
        code, out, err = finish(loop)
        sub_code, sub_out, _ = finish(sub)
    finally:
        go.touch()
        for p in (loop, sub):
            if p is not None and p.poll() is None:
                p.kill()
    assert code == 0, err
    assert sub_code == 0
    sub_id = json.loads(sub_out)["id"]
    summary = json.loads(out)
    log = log_events(loop_ws)
    waiting = events(log, "subjobs-waiting")
    assert waiting and waiting[0]["open"][0]["id"] == sub_id  # the loop waited for it...
    (seen,) = events(log, "subjobs")[0]["jobs"]
    assert seen["id"] == sub_id and seen["state"] == "completed" and seen["parent"] == creator_job
    # ...and only then asked for the review, telling the reviewer how the sub-job ended.
    assert events(log, "subjobs")[0]["ts"] <= events(log, "snapshot")[0]["ts"]
    brief = (Path(summary["folder"]) / "round-1" / "brief-review-rev.md").read_text()
    assert f"{sub_id} on helper (sub-job of {creator_job}): completed" in brief
    assert summary["history"][0]["subjobs"][0]["id"] == sub_id


def test_a_second_loop_on_the_same_checkout_is_refused_while_one_runs(loop_ws, poll):
    create_demo("creator")
    task = "demo-sleep: 4\ndemo-write: feature.txt :: the feature"
    first = spawn_mam("loop", "--json", *FAST_JOB, "--creator", "creator", "--task", task)
    try:
        note = poll(lambda: next(iter(loop_ws.locks_dir.glob("loop-*.json")), None), timeout=30, message="no loop lock")
        running = json.loads(note.read_text())
        env = {**os.environ, "MAM_BIN": MAM}
        import subprocess

        second = subprocess.run(
            ["bash", str(RUN_LOOP), "--creator", "creator", "--task", "another task"],
            env=env,
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert second.returncode == 4, second.stderr
        assert "another loop is already running" in second.stderr and running["loop_id"] in second.stderr
        code, out, err = finish(first)
    finally:
        if first.poll() is None:
            first.kill()
    assert code == 0, err
    assert json.loads(out)["loop_id"] == running["loop_id"]
    assert not list(loop_ws.locks_dir.glob("loop-*.json"))  # the note goes with the lock
    assert len(list((loop_ws.state / "loops").iterdir())) == 1  # the refused loop left nothing behind
    code, summary, proc = run_loop("--creator", "creator", "--task", "demo-write: again.txt :: again")
    assert code == 0, proc.stderr  # and once it ended, the next loop runs


def test_a_loop_on_an_issue_worktree_pins_base_and_tree(loop_ws, tmp_path):
    ws = loop_ws
    main = git(ws.root, "rev-parse", "main")
    wt = tmp_path / "wt-issue-7"
    mam("worktree", "prepare", "--name", "issue-7", "--path", str(wt), check=True)
    create_demo("creator", extra=("--cwd", str(wt)))
    create_demo("rev", role="reviewer")
    code, summary, proc = run_loop(
        "--creator",
        "creator",
        "--reviewer",
        "rev",
        "--worktree-dir",
        str(wt),
        "--base",
        "main",
        "--task",
        "demo-write: issue.txt :: fixed\ndemo-commit: fix issue 7",
    )
    assert code == 0, proc.stderr
    assert summary["snapshot"]["base"] == main
    assert summary["snapshot"]["head"] == git(wt, "rev-parse", "HEAD") != main
    assert summary["snapshot"]["tree"] == expected_tree(wt)
    assert summary["snapshot"]["repo"] == str(wt.resolve())
    assert git(ws.root, "rev-parse", "HEAD") == main  # the main checkout was not touched
    assert (wt / "issue.txt").exists() and not (ws.root / "issue.txt").exists()
