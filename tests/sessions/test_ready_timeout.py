"""MAM_READY_TIMEOUT_S: how long `session create` waits for the agent's ready screen.

The fake codex draws its early composer (no status line: not ready) for MAM_FAKE_CODEX_EARLY_S seconds, then
its ready screen. With a ready wait shorter than that early frame the session is created, running, and noted
not ready; with the default wait (20 s) the same agent is seen ready.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.helpers.mamcli import mam

EARLY_S = "4"  # the fake's not-ready frame: far longer than the short wait, far shorter than the default one


def create(folder: Path, name: str, env: dict[str, str]) -> dict:
    argv = ("session", "create", "--agent", "codex", "--role", "dev", "--session", name, "--cwd", str(folder))
    return json.loads(mam(*argv, "--json", env={"MAM_FAKE_CODEX_EARLY_S": EARLY_S, **env}, check=True).stdout)


@pytest.mark.slow  # about 12-25 s: started among the first, not last (tests/conftest.py)
def test_a_short_ready_wait_creates_the_session_noted_not_ready(workspace, fake_agents_on_path, tmp_path: Path):
    row = create(tmp_path, "short", {"MAM_READY_TIMEOUT_S": "1"})
    assert row["status"] == "running"
    assert row["note"] == "created; the agent did not show it was ready in time"
    assert row["ready_at"] is None

    waited = create(tmp_path, "default", {})
    assert waited["note"] == "created" and waited["ready_at"] is not None
    mam("session", "stop", "--session", "short", check=True)
    mam("session", "stop", "--session", "default", check=True)


def test_a_ready_timeout_that_is_not_a_positive_number_is_refused(workspace, fake_agents_on_path, tmp_path: Path):
    argv = ("session", "create", "--agent", "codex", "--role", "dev", "--session", "bad", "--cwd", str(tmp_path))
    proc = mam(*argv, env={"MAM_READY_TIMEOUT_S": "soon"})
    assert proc.returncode == 2, proc.stderr
    assert "MAM_READY_TIMEOUT_S" in proc.stderr
    assert json.loads(mam("session", "status", "--json", check=True).stdout) == []
