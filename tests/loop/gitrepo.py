"""Throwaway git repositories for loop tests (all git commands run inside the temp repo only)."""

from __future__ import annotations

import os
import subprocess
import tempfile
from pathlib import Path

IGNORE = ".mam/\n.agents/\n*.log\n"


def git(repo: Path, *args: str, env: dict[str, str] | None = None) -> str:
    proc = subprocess.run(["git", *args], cwd=repo, capture_output=True, text=True, env={**os.environ, **(env or {})})
    assert proc.returncode == 0, f"git {' '.join(args)}: {proc.stderr}"
    return proc.stdout.strip()


def make_repo(root: Path, files: dict[str, str] | None = None) -> Path:
    """git init (branch main, identity local to the repo), a .gitignore for mam's state, one commit."""
    root.mkdir(parents=True, exist_ok=True)
    git(root, "init", "-q", "-b", "main")
    git(root, "config", "user.name", "mam tests")
    git(root, "config", "user.email", "tests@mam.invalid")
    git(root, "config", "commit.gpgsign", "false")
    (root / ".gitignore").write_text(IGNORE)
    for name, text in (files or {"README.md": "hello\n"}).items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(text)
    git(root, "add", "-A")
    git(root, "commit", "-q", "-m", "initial")
    return root


def expected_tree(repo: Path) -> str:
    """The tree of HEAD plus every uncommitted and untracked (not ignored) file, via a temporary index."""
    with tempfile.TemporaryDirectory() as tmp:
        env = {"GIT_INDEX_FILE": str(Path(tmp) / "index")}
        git(repo, "read-tree", "HEAD", env=env)
        git(repo, "add", "-A", env=env)
        return git(repo, "write-tree", env=env)
