"""Snapshots: a tree hash of HEAD plus uncommitted and untracked files, never touching the user's index."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from mam.errors import UsageError
from mam.loop.snapshot import EMPTY_TREE, resolve_base, take_snapshot
from tests.loop.gitrepo import expected_tree, git, make_repo


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    return make_repo(tmp_path / "repo", {"a.txt": "a\n", "src/b.txt": "b\n"})


def snap(repo: Path, base: str = ""):
    return take_snapshot(repo, base or git(repo, "rev-parse", "HEAD"), dict(os.environ), exclude=[repo / ".mam"])


def test_a_clean_checkout_is_heads_tree(repo: Path) -> None:
    s = snap(repo)
    assert s.tree == git(repo, "rev-parse", "HEAD^{tree}") and not s.dirty
    assert s.head == git(repo, "rev-parse", "HEAD") and s.repo == str(repo.resolve())


def test_the_users_index_and_worktree_are_byte_identical(repo: Path) -> None:
    (repo / "a.txt").write_text("changed\n")
    (repo / "staged.txt").write_text("s\n")
    git(repo, "add", "staged.txt")
    (repo / "untracked.txt").write_text("u\n")
    status = git(repo, "status", "--porcelain")
    index = (repo / ".git" / "index").read_bytes()  # `git status` may refresh it; take it after
    s = snap(repo)
    assert (repo / ".git" / "index").read_bytes() == index
    assert git(repo, "status", "--porcelain") == status
    assert (repo / "a.txt").read_text() == "changed\n"
    assert s.dirty


def test_uncommitted_and_untracked_files_change_the_tree(repo: Path) -> None:
    clean = snap(repo).tree
    (repo / "a.txt").write_text("edited\n")
    edited = snap(repo).tree
    assert edited != clean
    (repo / "src" / "new.txt").write_text("new\n")
    untracked = snap(repo).tree
    assert untracked not in (clean, edited)
    assert untracked == expected_tree(repo)
    (repo / "src" / "b.txt").unlink()
    assert snap(repo).tree not in (clean, edited, untracked)


def test_ignored_files_and_mam_state_do_not_change_the_tree(repo: Path) -> None:
    before = snap(repo).tree
    (repo / "build.log").write_text("noise\n")
    (repo / ".mam" / "loops").mkdir(parents=True)
    (repo / ".mam" / "loops" / "report.md").write_text("r\n")
    (repo / ".agents" / "reports").mkdir(parents=True)
    (repo / ".agents" / "reports" / "x.md").write_text("x\n")
    assert snap(repo).tree == before


def test_mam_state_is_excluded_even_when_not_ignored(repo: Path) -> None:
    (repo / ".gitignore").write_text("")
    git(repo, "commit", "-qam", "no ignores")
    before = snap(repo).tree
    (repo / ".mam").mkdir()
    (repo / ".mam" / "state.db").write_text("db\n")
    assert snap(repo).tree == before


def test_a_commit_with_the_same_content_keeps_the_tree_but_moves_head(repo: Path) -> None:
    (repo / "a.txt").write_text("edited\n")
    s1 = snap(repo)
    git(repo, "commit", "-qam", "edit")
    s2 = snap(repo, s1.base)
    assert s1.tree == s2.tree and s1.head != s2.head and not s1.same_source(s2)


def test_base_defaults_to_the_merge_base_with_the_default_branch(repo: Path) -> None:
    main = git(repo, "rev-parse", "HEAD")
    git(repo, "checkout", "-q", "-b", "feature")
    (repo / "f.txt").write_text("f\n")
    git(repo, "add", "f.txt")
    git(repo, "commit", "-qm", "feature")
    base, how = resolve_base(repo, None, dict(os.environ))
    assert base == main and "merge-base" in how and "main" in how
    given, how = resolve_base(repo, "HEAD", dict(os.environ))
    assert given == git(repo, "rev-parse", "HEAD") and "--base" in how
    with pytest.raises(UsageError, match="is not a commit"):
        resolve_base(repo, "no-such-rev", dict(os.environ))


def test_without_a_default_branch_the_base_is_head(tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "r")
    git(repo, "branch", "-m", "main", "trunk")
    base, how = resolve_base(repo, None, {"PATH": os.environ["PATH"], "HOME": os.environ["HOME"]})
    assert base == git(repo, "rev-parse", "HEAD") and "HEAD" in how


def test_a_repository_without_commits(tmp_path: Path) -> None:
    repo = tmp_path / "empty"
    repo.mkdir()
    git(repo, "init", "-q")
    (repo / "x.txt").write_text("x\n")
    base, _ = resolve_base(repo, None, dict(os.environ))
    s = take_snapshot(repo, base, dict(os.environ))
    assert base == EMPTY_TREE and s.head == "" and s.dirty and s.tree != EMPTY_TREE


def test_git_variables_in_the_environment_do_not_redirect_it(repo: Path, tmp_path: Path) -> None:
    other = make_repo(tmp_path / "other", {"z.txt": "z\n"})
    env = {**os.environ, "GIT_DIR": str(other / ".git"), "GIT_INDEX_FILE": str(other / ".git" / "index")}
    s = take_snapshot(repo, "HEAD", env)
    assert s.tree == git(repo, "rev-parse", "HEAD^{tree}")
