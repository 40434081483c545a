"""`mam worktree prepare|remove` and their scripts: refuse what exists, remove only what is clean."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

from tests.helpers.mamcli import MAM, mam
from tests.loop.gitrepo import git, make_repo

REPO = Path(__file__).resolve().parents[2]
SCRIPTS = {
    "prepare": [
        REPO / "scripts" / "worktree_prepare.sh",
        REPO / "skills" / "multi-agent-mux-create" / "scripts" / "worktree_prepare.sh",
    ],
    "remove": [
        REPO / "scripts" / "worktree_remove.sh",
        REPO / "skills" / "multi-agent-mux-stop" / "scripts" / "worktree_remove.sh",
    ],
}
# Local submodules are cloned over file://, which git refuses for submodules by default.
FILE_PROTOCOL = {"GIT_CONFIG_COUNT": "1", "GIT_CONFIG_KEY_0": "protocol.file.allow", "GIT_CONFIG_VALUE_0": "always"}


@pytest.fixture
def repo(workspace, monkeypatch):
    for key, value in FILE_PROTOCOL.items():
        monkeypatch.setenv(key, value)
    return make_repo(workspace.root, {"README.md": "hello\n"})


def script(kind: str, *args: str, which: int = 0) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["bash", str(SCRIPTS[kind][which]), *args],
        env={**os.environ, "MAM_BIN": MAM},
        capture_output=True,
        text=True,
        timeout=60,
    )


def test_prepare_creates_a_branch_from_base_and_refuses_twice(repo: Path, tmp_path: Path) -> None:
    first = git(repo, "rev-parse", "HEAD")
    (repo / "more.txt").write_text("x\n")
    git(repo, "add", "more.txt")
    git(repo, "commit", "-qm", "more")
    wt = tmp_path / "issue-12"
    proc = mam("worktree", "prepare", "--name", "issue-12", "--path", str(wt), "--base", first, "--json", check=True)
    done = json.loads(proc.stdout)
    assert done == {"path": str(wt), "branch": "issue-12", "base": first, "submodules": False}
    assert git(wt, "rev-parse", "HEAD") == first and git(wt, "branch", "--show-current") == "issue-12"
    assert not (wt / "more.txt").exists()
    again = mam("worktree", "prepare", "--name", "issue-12", "--path", str(wt))
    assert again.returncode == 1 and "already exists" in again.stderr
    other = mam("worktree", "prepare", "--name", "issue-12", "--path", str(tmp_path / "elsewhere"))
    assert other.returncode == 1 and "branch 'issue-12' already exists" in other.stderr
    bad = mam("worktree", "prepare", "--name", "bad..name", "--path", str(tmp_path / "bad"))
    assert bad.returncode == 1 and "not a valid branch name" in bad.stderr


def test_the_default_place_is_under_mam_and_the_scripts_work(repo: Path, workspace) -> None:
    for which in (0, 1):
        name = f"issue-{which}"
        proc = script("prepare", "--name", name, which=which)
        assert proc.returncode == 0, proc.stderr
        wt = workspace.state / "worktrees" / name
        assert (wt / "README.md").exists()
        proc = script("remove", "--name", name, which=which)
        assert proc.returncode == 0, proc.stderr
        assert not wt.exists() and "branch issue-" in proc.stdout
        assert git(repo, "rev-parse", "--verify", f"refs/heads/{name}")  # the branch is kept


def test_remove_refuses_a_dirty_worktree_and_lists_what_is_dirty(repo: Path, tmp_path: Path) -> None:
    wt = tmp_path / "wt"
    mam("worktree", "prepare", "--name", "dirty", "--path", str(wt), check=True)
    (wt / "README.md").write_text("edited\n")
    (wt / "new.txt").write_text("untracked\n")
    proc = mam("worktree", "remove", "--path", str(wt))
    assert proc.returncode == 1
    assert "not clean" in proc.stderr and "M README.md" in proc.stderr and "?? new.txt" in proc.stderr
    assert wt.exists()
    forced = mam("worktree", "remove", "--path", str(wt), "--force")
    assert forced.returncode == 0, forced.stderr
    assert not wt.exists() and "discarded 2 change(s)" in forced.stderr


def test_remove_refuses_the_main_checkout_and_strangers(repo: Path, tmp_path: Path) -> None:
    proc = mam("worktree", "remove", "--path", str(repo))
    assert proc.returncode == 1 and "main checkout" in proc.stderr
    proc = mam("worktree", "remove", "--path", str(tmp_path / "nowhere"))
    assert proc.returncode == 1 and "not a worktree" in proc.stderr
    proc = mam("worktree", "remove")
    assert proc.returncode == 2


def test_a_dirty_submodule_blocks_remove(repo: Path, tmp_path: Path) -> None:
    lib = make_repo(tmp_path / "lib", {"lib.txt": "lib\n"})
    git(repo, "submodule", "add", "-q", str(lib), "vendor/lib")
    git(repo, "commit", "-qm", "add lib")
    wt = tmp_path / "wt-sub"
    done = json.loads(mam("worktree", "prepare", "--name", "with-sub", "--path", str(wt), "--json", check=True).stdout)
    assert done["submodules"] is True and (wt / "vendor" / "lib" / "lib.txt").exists()
    (wt / "vendor" / "lib" / "scratch.txt").write_text("left behind\n")
    proc = mam("worktree", "remove", "--path", str(wt))
    assert proc.returncode == 1, proc.stdout
    assert "vendor/lib: ?? scratch.txt" in proc.stderr
    assert (wt / "vendor" / "lib" / "scratch.txt").exists()
    (wt / "vendor" / "lib" / "scratch.txt").unlink()
    (wt / "vendor" / "lib" / "lib.txt").write_text("changed inside the submodule\n")
    proc = mam("worktree", "remove", "--path", str(wt))
    assert proc.returncode == 1 and "vendor/lib:  M lib.txt" in proc.stderr
    git(wt / "vendor" / "lib", "checkout", "--", "lib.txt")
    proc = mam("worktree", "remove", "--path", str(wt))  # clean again, submodule and all: removed
    assert proc.returncode == 0, proc.stderr
    assert not wt.exists()
