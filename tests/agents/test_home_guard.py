"""The real-HOME guard of tests/conftest.py would notice a fake agent writing into agent folders."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from tests.agents.conftest import AGENTS, seed
from tests.helpers import home_guard


def test_snapshot_and_diff_see_new_changed_and_removed_files(tmp_path: Path) -> None:
    home = tmp_path / "guarded-home"
    transcript = home / ".claude" / "projects" / "-x" / "a.jsonl"
    transcript.parent.mkdir(parents=True)
    transcript.write_text("{}\n")
    (home / "notes.txt").write_text("not an agent folder")
    before = home_guard.snapshot(home)
    assert home_guard.diff(before, home_guard.snapshot(home)) == []

    (home / ".claude" / "projects" / "-x" / "b.jsonl").write_text("{}\n")
    os.utime(transcript, (time.time() + 5, time.time() + 5))
    (home / "notes.txt").write_text("changed, but outside every agent folder")
    changed = home_guard.diff(before, home_guard.snapshot(home))
    assert str(home / ".claude" / "projects" / "-x" / "b.jsonl") in changed
    assert str(transcript) in changed
    assert not any("notes.txt" in p for p in changed)

    transcript.unlink()
    assert str(transcript) in home_guard.diff(before, home_guard.snapshot(home))


@pytest.mark.parametrize("agent", AGENTS)
def test_every_fake_store_lands_where_the_guard_looks(agent: str, tmp_path: Path) -> None:
    home = tmp_path / "guarded-home"
    home.mkdir()
    (home / ".local" / "share").mkdir(parents=True)
    before = home_guard.snapshot(home)
    seed(agent, {"HOME": str(home)}, str(tmp_path), time.time())
    assert home_guard.diff(before, home_guard.snapshot(home)), f"a {agent} conversation in HOME would go unnoticed"


def test_tests_run_with_a_temporary_home() -> None:
    from tests.conftest import REAL_HOME

    assert Path(os.environ["HOME"]) != REAL_HOME
    assert Path(os.environ["XDG_DATA_HOME"]).is_relative_to(Path(os.environ["HOME"]))
