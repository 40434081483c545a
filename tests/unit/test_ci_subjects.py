"""`.ci/subjects` (run by `.ci/lint`): commits after the base need subjects of at most 72 characters."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parents[2] / ".ci" / "subjects"
GIT_ENV = {
    "GIT_AUTHOR_NAME": "t",
    "GIT_AUTHOR_EMAIL": "t@example.invalid",
    "GIT_COMMITTER_NAME": "t",
    "GIT_COMMITTER_EMAIL": "t@example.invalid",
    "GIT_CONFIG_GLOBAL": "/dev/null",
    "GIT_CONFIG_NOSYSTEM": "1",
    "PATH": "/usr/bin:/bin",
}


def git(repo: Path, *args: str) -> str:
    return subprocess.run(
        ["git", "-C", str(repo), *args], env=GIT_ENV, capture_output=True, text=True, check=True
    ).stdout.strip()


def commit(repo: Path, subject: str, body: str = "") -> str:
    message = ["-m", subject] + (["-m", body] if body else [])
    git(repo, "commit", "-q", "--allow-empty", *message)
    return git(repo, "rev-parse", "HEAD")


def run(repo: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["bash", str(repo / ".ci" / "subjects"), *args], env=GIT_ENV, capture_output=True, text=True, check=False
    )


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    root = tmp_path / "repo"
    (root / ".ci").mkdir(parents=True)
    shutil.copy(SCRIPT, root / ".ci" / "subjects")
    git(root, "init", "-q", "-b", "main")
    git(root, "add", ".ci")
    commit(root, "An old subject from before the rule, far longer than seventy-two characters, as they were")
    return root


def test_short_subjects_after_the_base_pass_and_the_history_before_is_left_alone(repo: Path) -> None:
    base = git(repo, "rev-parse", "HEAD")
    commit(repo, "Add a check", "The detail goes in the body, " * 10)
    commit(repo, "x" * 72)
    out = run(repo, base)
    assert out.returncode == 0, out.stderr
    assert "at most 72" in out.stdout


def test_a_subject_of_73_characters_fails_naming_the_commit(repo: Path) -> None:
    base = git(repo, "rev-parse", "HEAD")
    commit(repo, "Add a check")
    long = commit(repo, "y" * 73)
    commit(repo, "Fix it after")
    out = run(repo, base)
    assert out.returncode == 1
    assert long[:7] in out.stderr and "73-character subject" in out.stderr
    assert "1 commit(s)" in out.stderr


def test_characters_not_bytes_are_counted(repo: Path) -> None:
    base = git(repo, "rev-parse", "HEAD")
    commit(repo, "é" * 72)  # 144 bytes, 72 characters
    assert run(repo, base).returncode == 0


def test_a_shallow_clone_or_a_missing_base_is_skipped_in_one_line(repo: Path, tmp_path: Path) -> None:
    base = git(repo, "rev-parse", "HEAD")
    commit(repo, "z" * 80)
    commit(repo, "Short")
    shallow = tmp_path / "shallow"
    subprocess.run(["git", "clone", "-q", "--depth", "1", f"file://{repo}", str(shallow)], env=GIT_ENV, check=True)
    out = run(shallow, base)
    assert out.returncode == 0 and out.stdout.count("\n") == 1 and "skipped" in out.stdout
    out = run(repo, "0" * 40)
    assert out.returncode == 0 and "skipped" in out.stdout
