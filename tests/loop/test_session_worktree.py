"""A worktree per session (`mam session create --worktree`), `mam session remove`, and `mam doctor`'s
worktree check: demo agents in real panes, the real CLI, a git workspace on a real broker."""

from __future__ import annotations

import json
import os
import shutil
import subprocess

from tests.helpers.jobs import FAST, create_demo
from tests.helpers.mamcli import mam, mam_json
from tests.loop.gitrepo import git
from tests.loop.helpers import FAST_JOB


def delegate(session: str, brief: str) -> None:
    proc = mam("job", "delegate", "--target", f"tmux:{session}", "--brief", brief, *FAST_JOB, env=FAST, timeout=120)
    assert proc.returncode == 0, proc.stderr


def status_of(name: str) -> dict:
    return next(r for r in mam_json("session", "status") if r["name"] == name)


def test_two_worktree_sessions_change_one_file_apart_and_remove_keeps_unmerged_work(loop_ws):
    ws = loop_ws
    main_head = git(ws.root, "rev-parse", "HEAD")
    a = create_demo("wt-a", extra=("--worktree",))
    b = create_demo("wt-b", extra=("--worktree", "--branch", "feature/b", "--base", "main"))
    path_a, path_b = ws.state / "worktrees" / "wt-a", ws.state / "worktrees" / "wt-b"
    assert (a["worktree"], a["branch"], a["base"], a["base_commit"]) == (str(path_a), "mam/wt-a", "main", main_head)
    assert (b["branch"], b["base"], b["base_commit"]) == ("feature/b", "main", main_head)
    assert a["cwd"] == str(path_a.resolve()) and a["host"]
    row = status_of("wt-b")
    assert (row["worktree"], row["branch"], row["base"]) == (str(path_b), "feature/b", "main")
    assert row["pane_cwd"] and os.path.realpath(row["pane_cwd"]) == str(path_b.resolve())

    delegate("wt-a", "demo-write: README.md :: from a\ndemo-commit: a's readme")
    delegate("wt-b", "demo-write: README.md :: from b\ndemo-commit: b's readme")
    assert (path_a / "README.md").read_text() == "from a\n" and (path_b / "README.md").read_text() == "from b\n"
    assert (ws.root / "README.md").read_text() == "hello\n"  # the main checkout is untouched
    assert git(ws.root, "rev-parse", "HEAD") == main_head and git(ws.root, "status", "--porcelain") == ""
    assert git(ws.root, "log", "-1", "--format=%s", "mam/wt-a") == "a's readme"
    assert git(ws.root, "log", "-1", "--format=%s", "feature/b") == "b's readme"

    # Running: refused without --force, nothing removed.
    proc = mam("session", "remove", "wt-a")
    assert proc.returncode == 5 and "--force" in proc.stderr and len(proc.stderr.strip().splitlines()) == 1
    assert path_a.is_dir() and status_of("wt-a")["status"] == "running"

    # --force stops it, removes the clean worktree, and keeps the branch with its unmerged commit.
    done = mam_json("session", "remove", "wt-a", "--force")
    assert done["stopped"] is True and done["worktree"]["worktree_removed"] is True
    assert done["worktree"]["branch_deleted"] is False and done["worktree"]["unmerged"] == 1
    assert not path_a.exists() and git(ws.root, "log", "-1", "--format=%s", "mam/wt-a") == "a's readme"
    assert "wt-a" not in ws.mirror_path.read_text()
    kept = mam_json("job", "list", "--session", "wt-a")
    assert len(kept) == 1 and kept[0]["state"] == "completed"  # its job history stays
    assert all(r["name"] != "wt-a" for r in mam_json("session", "status"))
    proc = mam("session", "remove", "wt-a")
    assert proc.returncode == 5  # gone

    # A dirty worktree is refused even when the session is stopped; --force discards, keeps the branch.
    mam("session", "stop", "--session", "wt-b", check=True)
    (path_b / "scratch.txt").write_text("uncommitted\n")
    proc = mam("session", "remove", "wt-b")
    assert proc.returncode == 5 and "scratch.txt" in proc.stderr
    assert path_b.is_dir() and status_of("wt-b")["status"] == "stopped"
    proc = mam("session", "remove", "--session", "wt-b", "--force")
    assert proc.returncode == 0, proc.stderr
    assert "branch feature/b kept: 1 commit(s) not merged into main" in proc.stdout
    assert not path_b.exists() and git(ws.root, "rev-parse", "--verify", "feature/b")

    # The names are free again; a session whose branch holds nothing new gives the branch back.
    c = create_demo("wt-a", extra=("--worktree", "--branch", "empty-c"))
    assert c["branch"] == "empty-c"
    done = mam_json("session", "remove", "wt-a", "--force")
    assert done["worktree"]["branch_deleted"] is True
    assert git(ws.root, "branch", "--list", "empty-c") == ""


def test_resume_refuses_a_worktree_gone_or_on_another_branch_and_doctor_lists_strays(loop_ws):
    ws = loop_ws
    create_demo("wt-r", extra=("--worktree",))
    path = ws.state / "worktrees" / "wt-r"
    mam("session", "stop", "--session", "wt-r", check=True)

    git(path, "switch", "-q", "-c", "elsewhere")
    proc = mam("session", "resume", "--session", "wt-r")
    assert proc.returncode == 5 and "is on elsewhere, not on its branch mam/wt-r" in proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1
    git(path, "switch", "-q", "mam/wt-r")
    mam("session", "resume", "--session", "wt-r", check=True)
    mam("session", "stop", "--session", "wt-r", check=True)

    shutil.rmtree(path)
    proc = mam("session", "resume", "--session", "wt-r")
    assert proc.returncode == 5 and "its worktree" in proc.stderr and "is gone" in proc.stderr
    assert status_of("wt-r")["status"] == "stopped"

    # doctor: a session without its worktree, and a worktree folder without a session.
    orphan = ws.state / "worktrees" / "left-behind"
    orphan.mkdir()
    (orphan / "big.bin").write_bytes(b"x" * 4096)
    report = json.loads(mam("doctor", "--json").stdout)
    check = next(c for c in report["checks"] if c["name"] == "worktrees")
    assert check["status"] == "warn"
    assert f"session without its worktree: {path} (session wt-r)" in check["detail"]
    assert f"worktree without a session: {orphan}, 4.0 KB" in check["detail"]

    # remove frees the name of a session whose worktree is gone; its branch held nothing: deleted.
    done = mam_json("session", "remove", "wt-r")
    assert done["worktree"]["worktree_removed"] is False and done["worktree"]["branch_deleted"] is True


def test_bad_worktree_requests_write_nothing(loop_ws):
    ws = loop_ws
    for args, says in (
        (("--branch", "x"), "--branch and --base go with --worktree"),
        (("--worktree", "--branch", "bad..name"), "not a valid branch name"),
        (("--worktree", "--branch", "@{-1}"), "not a valid branch name"),
        (("--worktree", "--branch", "-x"), "not a valid branch name"),
        (("--worktree", "--branch", "main"), "already exists"),
        (("--worktree", "--base", "no-such-ref"), "is not a commit"),
        (("--worktree", "--cwd", str(ws.root)), "do not go together"),
    ):
        proc = mam("session", "create", "--agent", "demo", "--role", "dev", "--session", "bad", *args)
        assert proc.returncode == 2 and says in proc.stderr, (args, proc.stderr)
    assert not (ws.state / "worktrees").exists() and not ws.db_path.exists()
    assert git(ws.root, "branch", "--list") == "* main"
    proc = mam("session", "remove", "nobody", "--purge-conversation")
    assert proc.returncode == 2 and "--yes" in proc.stderr


def test_remove_a_plain_session_stopped_or_terminated_frees_its_name(loop_ws):
    made = create_demo("plain")
    mam("session", "stop", "--session", "plain", check=True)
    proc = mam("session", "remove", "plain")
    assert proc.returncode == 0 and proc.stdout.strip() == "session plain: removed", proc.stderr
    assert all(r["name"] != "plain" for r in mam_json("session", "status"))
    again = create_demo("plain")
    assert again["conversation_id"] != made["conversation_id"] and again["status"] == "running"  # a new session
    # Its agent dies: the session is terminated; remove needs no --force then.
    # The pane is killed through tmux's own CLI, on the workspace's private server.
    kill = subprocess.run(["tmux", "-L", again["server"], "kill-pane", "-t", again["pane_id"]], capture_output=True)
    assert kill.returncode == 0, kill.stderr
    assert mam("monitor", "--once").returncode == 0
    assert status_of("plain")["status"] == "terminated"
    conversation = loop_ws.state / "demo-agent" / "conversations" / f"{again['conversation_id']}.json"
    assert conversation.is_file()
    proc = mam("session", "remove", "plain", "--purge-conversation", "--yes", "--json")
    assert proc.returncode == 0, proc.stderr
    done = json.loads(proc.stdout)
    assert done["status"] == "terminated" and done["purged"] is True and done["worktree"] is None
    assert not conversation.exists()  # purged as `session stop --purge-conversation --yes` does


def test_a_worktree_in_a_repository_without_a_commit_says_to_make_one(workspace):
    """Seen in the README walk: `git init` in a new workspace, then `--worktree`, said `--base 'master' is not
    a commit` though no --base was given."""
    subprocess.run(["git", "init", "-q", "-b", "main"], cwd=workspace.root, check=True)
    proc = mam("session", "create", "--agent", "demo", "--role", "dev", "--session", "w1", "--worktree")
    assert proc.returncode == 2, proc.stderr
    assert "has none yet" in proc.stderr and "git commit" in proc.stderr and "--base" not in proc.stderr, proc.stderr
    assert not (workspace.state / "worktrees").exists() and not workspace.db_path.exists()
