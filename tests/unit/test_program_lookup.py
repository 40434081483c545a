"""Programs mam runs are found by absolute path, never through a relative or empty PATH entry (issue 38,
item 2): `.`, `bin` or an empty entry name whatever folder the lookup happens in, so a long-lived process
serving many callers would run a `git` or `tmux` planted in a working folder."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from mam.util import git as gitmod
from mam.util.proc import clean_path, find_program


def plant(folder: Path, name: str, marker: Path) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / name
    path.write_text(f"#!/bin/sh\necho planted >> {marker}\nexit 0\n")
    path.chmod(0o755)
    return path


def test_relative_and_empty_entries_are_dropped() -> None:
    sep = os.pathsep
    assert clean_path(f".{sep}{sep}bin{sep}/usr/bin{sep}./x{sep}/bin") == f"/usr/bin{sep}/bin"
    assert clean_path("") == ""


def test_a_program_in_the_working_folder_is_never_found(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    marker = tmp_path / "ran"
    plant(tmp_path / "cwd", "tmux", marker)
    monkeypatch.chdir(tmp_path / "cwd")
    real = find_program("sh", "/usr/bin:/bin")
    assert real is not None and os.path.isabs(real)
    for path in (".", f".{os.pathsep}", f"{os.pathsep}/nonexistent", "bin"):
        assert find_program("tmux", path) is None, path
    assert find_program("sh", f".{os.pathsep}{os.path.dirname(real)}") == real


def test_git_never_runs_a_git_planted_in_its_folder(tmp_path: Path) -> None:
    marker = tmp_path / "ran"
    folder = tmp_path / "repo"
    plant(folder, "git", marker)
    real = find_program("git")
    assert real is not None
    env = gitmod.git_env({"PATH": f".{os.pathsep}{os.pathsep}{os.path.dirname(real)}"})
    done = gitmod.git(["--version"], cwd=folder, env=env)
    assert done.stdout.startswith("git version")
    assert not marker.exists()
