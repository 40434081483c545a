"""The demo agent's `demo-commit:` names why a commit failed instead of passing it off as nothing to commit
(seen in the README walk: a new user's git without user.name and user.email printed `nothing to commit`)."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from mam.demo.agent import commit


def git(cwd: Path, *args: str) -> None:
    subprocess.run(["git", *args], cwd=cwd, check=True, capture_output=True)


@pytest.fixture
def repo(tmp_path, monkeypatch):
    for key in ("GIT_AUTHOR_NAME", "GIT_AUTHOR_EMAIL", "GIT_COMMITTER_NAME", "GIT_COMMITTER_EMAIL"):
        monkeypatch.delenv(key, raising=False)
    monkeypatch.setenv("HOME", str(tmp_path))  # no ~/.gitconfig
    monkeypatch.setenv("GIT_CONFIG_NOSYSTEM", "1")
    root = tmp_path / "repo"
    root.mkdir()
    git(root, "init", "-q")
    return root


def test_a_commit_without_an_identity_is_named_with_gits_reason(repo):
    git(repo, "config", "user.useConfigOnly", "true")  # never guess an identity from the host name
    (repo / "notes.md").write_text("first notes\n")
    result = commit("add notes", cwd=repo)
    assert result.startswith("commit failed: "), result
    assert "nothing to commit" not in result
    assert "fatal:" in result or "identity" in result.lower(), result


def test_a_commit_and_nothing_to_commit(repo):
    git(repo, "config", "user.name", "Walker")
    git(repo, "config", "user.email", "walker@example.com")
    (repo / "notes.md").write_text("first notes\n")
    assert commit("add notes", cwd=repo) == "commit"
    assert commit("again", cwd=repo) == "nothing to commit"
