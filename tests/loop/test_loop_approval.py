"""The approval gate (`mam loop --approve`, `mam loop approve|reject|status`) with a creator in its own
worktree: demo agents in real panes, real `mam` processes, a git workspace on a real broker.

The waiting loop and the person are separate processes: the loop runs in the background and the
test acts as the person through the CLI, as a person would from another terminal.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

from mam.util.poll import wait_for
from tests.helpers.jobs import create_demo
from tests.helpers.mamcli import MAM, mam, spawn_mam
from tests.loop.gitrepo import git, make_repo
from tests.loop.helpers import FAST_JOB, events, log_events

TASK = "demo-write: feature.txt :: the feature\ndemo-commit: add the feature"
CATCHER = """import sys
data = sys.stdin.read()
with open(sys.argv[1], "a") as f:
    f.write(data.replace("\\n", " ") + "\\n")
"""


RUN_LOOP = Path(__file__).resolve().parents[2] / "skills" / "multi-agent-mux-loop" / "scripts" / "run_loop.sh"


def start_loop(
    loop_id: str, *args: str, env: dict[str, str] | None = None, script: bool = False
) -> subprocess.Popen[str]:
    """`mam loop --approve ...` in the background (`script`: through the skill's run_loop.sh, as installed)."""
    argv = ["--json", *FAST_JOB, "--loop-id", loop_id, "--creator", "creator", "--approve", *args]
    if not script:
        return spawn_mam("loop", *argv, env=env)
    return subprocess.Popen(
        ["bash", str(RUN_LOOP), *argv],
        env={**os.environ, "MAM_BIN": MAM, **(env or {})},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def status(loop_id: str) -> dict[str, Any]:
    proc = mam("loop", "status", loop_id, "--json")
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)


def wait_gate(loop: subprocess.Popen[str], loop_id: str, round_number: int) -> dict[str, Any]:
    """Poll `mam loop status` until the loop waits for approval after `round_number` (fail if it ended)."""

    def waiting() -> dict[str, Any] | None:
        if loop.poll() is not None:
            out, err = loop.communicate()
            raise AssertionError(f"the loop ended ({loop.returncode}) instead of waiting:\n{out}\n{err}")
        proc = mam("loop", "status", loop_id, "--json")
        if proc.returncode == 5:  # its log is not written yet
            return None
        assert proc.returncode == 0, proc.stderr
        row = json.loads(proc.stdout)
        return row if row["state"] == "needs_approval" and row["approval"]["round"] == round_number else None

    return wait_for(waiting, timeout=120, interval=0.2)


def finish(loop: subprocess.Popen[str]) -> tuple[int, dict[str, Any], str]:
    try:
        out, err = loop.communicate(timeout=120)
    except subprocess.TimeoutExpired:
        loop.kill()
        loop.communicate()
        raise
    return loop.returncode, json.loads(out) if out.strip() else {}, err


def test_approve_merges_exactly_the_reviewed_tree_of_the_creators_worktree(loop_ws, tmp_path):
    ws = loop_ws
    caught = tmp_path / "notified.jsonl"
    catcher = tmp_path / "catcher.py"
    catcher.write_text(CATCHER)
    base = git(ws.root, "rev-parse", "main")
    create_demo("creator", extra=("--worktree",))
    create_demo("rev", role="reviewer")
    tree_dir = ws.state / "worktrees" / "creator"
    loop = start_loop(
        "loop-appr-1",
        "--reviewer",
        "rev",
        "--task",
        TASK,
        env={"MAM_NOTIFY": f"{sys.executable} {catcher} {caught}"},
        script=True,
    )
    try:
        row = wait_gate(loop, "loop-appr-1", 1)
        head = git(tree_dir, "rev-parse", "HEAD")
        gate = row["approval"]
        assert gate["branch"] == "mam/creator" and gate["base_branch"] == "main"
        identity = gate["identity"]
        # The loop reviewed the creator's branch against the base its worktree was made from.
        assert identity["base"] == base and identity["head"] == head
        assert identity["tree"] == git(tree_dir, "rev-parse", "HEAD^{tree}") and identity["dirty"] is False
        assert [(r["reviewer"], r["verdict"]) for r in gate["reports"]] == [("rev", "PASS")]
        assert git(ws.root, "rev-parse", "main") == base and not (ws.root / "feature.txt").exists()
        listed = json.loads(mam("loop", "status", "--json").stdout)
        assert [(r["id"], r["state"]) for r in listed] == [("loop-appr-1", "needs_approval")]
        text = mam("loop", "status").stdout
        assert "needs_approval" in text and f"tree {identity['tree']}" in text
        wait_for(lambda: caught.is_file() and "needs_approval" in caught.read_text(), timeout=30, interval=0.1)
        notes = [json.loads(line) for line in caught.read_text().splitlines()]
        note = next(n for n in notes if n["kind"] == "needs_approval")
        assert note["loop"] == "loop-appr-1" and note["state"] == "needs_approval"
        assert "mam loop approve loop-appr-1" in note["message"]

        proc = mam("loop", "approve", "loop-appr-1", "--json")
        assert proc.returncode == 0, proc.stderr
        decision = json.loads(proc.stdout)["decision"]
        code, summary, err = finish(loop)
    finally:
        if loop.poll() is None:
            loop.kill()
            loop.communicate()
    assert code == 0, err
    assert "waiting for approval of mam/creator into main" in err and "approved by" in err
    assert decision["merged"] == head and decision["mode"] == "ff" and decision["by"]
    # main now holds exactly the reviewed tree, and the main checkout followed.
    assert git(ws.root, "rev-parse", "main") == head
    assert git(ws.root, "rev-parse", "main^{tree}") == identity["tree"]
    assert (ws.root / "feature.txt").read_text() == "the feature\n" and git(ws.root, "status", "--porcelain") == ""
    assert summary["state"] == "approved" and summary["approval"]["merged"] == head
    log = log_events(ws, "loop-appr-1")
    assert [e["event"] for e in log if e["event"] in ("needs_approval", "approved", "end")] == [
        "needs_approval",
        "approved",
        "end",
    ]
    approved = events(log, "approved")[0]
    assert approved["merged"] == head and approved["by"] == decision["by"] and approved["when"]
    assert log[-1]["state"] == "approved" and log[-1]["exit_code"] == 0
    sidecar = Path(summary["promoted"][0]).with_suffix(".identity.json")
    stamp = json.loads(sidecar.read_text())["approval"]
    assert stamp["merged"] == head and stamp["by"] == decision["by"] and stamp["base_branch"] == "main"
    assert status("loop-appr-1")["state"] == "approved"
    # Nothing waits any more: a second approval is refused.
    again = mam("loop", "approve", "loop-appr-1")
    assert again.returncode == 5 and "not waiting for approval" in again.stderr


def test_a_branch_moved_after_review_is_refused_and_reviewed_again_then_rejected(loop_ws):
    ws = loop_ws
    base = git(ws.root, "rev-parse", "main")
    create_demo("creator", extra=("--worktree",))
    create_demo("rev", role="reviewer")
    tree_dir = ws.state / "worktrees" / "creator"
    loop = start_loop("loop-appr-2", "--reviewer", "rev", "--task", TASK, "--max-loop", "3")
    try:
        first = wait_gate(loop, "loop-appr-2", 1)["approval"]["identity"]
        # Someone commits on the branch after the review.
        (tree_dir / "late.txt").write_text("not reviewed\n")
        git(tree_dir, "add", "late.txt")
        git(tree_dir, "commit", "-q", "-m", "a late change")
        moved = git(tree_dir, "rev-parse", "HEAD")
        proc = mam("loop", "approve", "loop-appr-2")
        assert proc.returncode == 5, proc.stderr
        assert len(proc.stderr.strip().splitlines()) == 1
        assert f"moved from the reviewed head {first['head'][:12]} to {moved[:12]}" in proc.stderr
        assert "reviews it again" in proc.stderr
        assert git(ws.root, "rev-parse", "main") == base  # nothing merged

        # The loop reviews the branch as it is now and waits again, with the new identity.
        second = wait_gate(loop, "loop-appr-2", 2)["approval"]["identity"]
        assert second["head"] == moved and second["tree"] == git(tree_dir, "rev-parse", "HEAD^{tree}")
        brief = (ws.state / "loops" / "loop-appr-2" / "round-2" / "brief-review-rev.md").read_text()
        assert "an approval found the branch changed" in brief

        # Rejected: the creator gets the note in its fix brief and works on it; the next round passes.
        note = "demo-append: NOTE.md :: from the person\ndemo-commit: address the note"
        proc = mam("loop", "reject", "loop-appr-2", "--note", note)
        assert proc.returncode == 0, proc.stderr
        assert proc.stdout.endswith("the creator gets the note in a fix brief, then another round\n"), proc.stdout
        wait_gate(loop, "loop-appr-2", 3)
        fix = (ws.state / "loops" / "loop-appr-2" / "round-2" / "brief-fix-creator.md").read_text()
        assert fix.splitlines()[0] == "[mam-loop: fix]" and "demo-append: NOTE.md :: from the person" in fix
        assert (tree_dir / "NOTE.md").read_text() == "from the person\n"
        assert git(tree_dir, "log", "-1", "--format=%s") == "address the note"

        # Rejected again in round 3, the last of --max-loop: the loop ends, exit 1; main never moved.
        proc = mam("loop", "reject", "loop-appr-2", "--note", "still no")
        assert proc.returncode == 0, proc.stderr
        said = proc.stdout.strip()
        assert said.endswith(
            "round 3 was the last of --max-loop 3, so the loop ends not passed (exit 1) and the note is kept in its log"
        )
        assert "fix brief" not in said  # nobody gets it: the loop ends
        code, summary, err = finish(loop)
    finally:
        if loop.poll() is None:
            loop.kill()
            loop.communicate()
    assert code == 1, err
    assert summary["state"] == "not_passed" and "rejected by" in summary["reason"]
    assert git(ws.root, "rev-parse", "main") == base
    log = log_events(ws, "loop-appr-2")
    assert len(events(log, "approval-refused")) == 1 and len(events(log, "rejected")) == 2
    assert status("loop-appr-2")["state"] == "not_passed"


def test_the_gate_outlives_the_waiting_process(loop_ws):
    """The waiting `mam loop` is killed: the gate is still on disk, and an approval still merges."""
    ws = loop_ws
    create_demo("creator", extra=("--worktree",))
    loop = start_loop("loop-appr-3", "--task", TASK)
    try:
        identity = wait_gate(loop, "loop-appr-3", 1)["approval"]["identity"]
    finally:
        loop.send_signal(signal.SIGKILL)
        loop.communicate(timeout=30)
    assert status("loop-appr-3")["state"] == "needs_approval"
    proc = mam("loop", "approve", "loop-appr-3", "--merge", "merge")
    assert proc.returncode == 0, proc.stderr
    row = status("loop-appr-3")
    assert row["state"] == "approved" and row["approval"]["decision"]["mode"] == "merge"
    merged = row["approval"]["decision"]["merged"]
    assert git(ws.root, "rev-parse", "main") == merged and git(ws.root, "rev-parse", "main^2") == identity["head"]
    assert git(ws.root, "rev-parse", "main^{tree}") == identity["tree"]


def test_approve_refuses_what_is_not_waiting_and_bad_requests(loop_ws):
    ws = loop_ws
    create_demo("creator")
    for args, code, says in (
        (("loop", "approve", "loop-nope"), 5, "no loop"),
        (("loop", "reject", "loop-nope", "--note", "x"), 5, "no loop"),
        (("loop", "status", "loop-nope"), 5, "no loop"),
        (("loop", "approve", "../etc"), 2, "invalid loop id"),
        (("loop", "approve", "loop-x", "--merge", "rebase"), 2, "rebase"),
        (("loop", "--task", "t"), 2, "--creator is required"),
        # The creator works in the main checkout, on the base branch itself: nothing to merge.
        (("loop", "--creator", "creator", "--task", "t", "--approve"), 2, "on the base branch main itself"),
    ):
        proc = mam(*args)
        assert proc.returncode == code and says in proc.stderr, (args, proc.returncode, proc.stderr)
    assert mam("loop", "status").stdout.strip() == "no loops"
    assert not (ws.state / "loops").exists()  # refused requests wrote nothing


def test_an_approval_never_lands_commits_the_review_did_not_cover(tmp_path):
    """A branch made from feature-x (three commits ahead of main) reviewed against feature-x's tip must not
    be merged into main: that would land feature-x's unreviewed commits. Into feature-x it may."""
    from mam.loop.approval import _unreviewed
    from mam.util.git import git_env

    repo = make_repo(tmp_path / "repo")
    git(repo, "checkout", "-q", "-b", "feature-x")
    for i in range(3):
        (repo / f"x{i}.txt").write_text(f"{i}\n")
        git(repo, "add", "-A")
        git(repo, "commit", "-q", "-m", f"unreviewed {i}")
    reviewed_base = git(repo, "rev-parse", "HEAD")
    git(repo, "checkout", "-q", "-b", "mam/dev")
    (repo / "dev.txt").write_text("the reviewed change\n")
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "reviewed")
    head = git(repo, "rev-parse", "HEAD")
    env = git_env(None)
    refused = _unreviewed(repo, "main", head, reviewed_base, env)
    assert "did not cover" in refused and "--base main" in refused
    assert _unreviewed(repo, "feature-x", head, reviewed_base, env) == ""
    git(repo, "checkout", "-q", "feature-x")  # feature-x moves on with other work: still only the review lands
    (repo / "other.txt").write_text("other\n")
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "other work")
    assert _unreviewed(repo, "feature-x", head, reviewed_base, env) == ""
