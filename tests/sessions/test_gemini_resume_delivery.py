"""A brief delegated right after `mam session resume` of a gemini session reaches it once.

Like gemini 0.61.0, the fake gemini draws its input box at once on `--resume` and only replays
the conversation later (with no box, losing whatever it got meanwhile; here 5 s later, longer
than the adapter's ready_settle_s and a delegate's start-up together): resume and delivery must
wait for the replay (the adapter's replay_pending), not only for a ready-looking screen.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tests.helpers.jobs import FAST
from tests.helpers.mamcli import mam


@pytest.fixture
def wired_ws(workspace, mosquitto_broker, monkeypatch):
    for key, value in {**mosquitto_broker.env(), **FAST}.items():
        monkeypatch.setenv(key, value)
    return workspace


def events(log: Path, event: str) -> list[dict[str, Any]]:
    if not log.exists():
        return []
    return [e for e in map(json.loads, log.read_text().splitlines()) if e["event"] == event]


def delegate(name: str, brief: str) -> dict[str, Any]:
    run = mam(
        "job",
        "delegate",
        "--target",
        f"tmux:{name}",
        "--brief",
        f"{brief}\nfake-work: 0",
        "--start-deadline",
        "30",
        "--timeout",
        "60",
        "--json",
        timeout=120,
    )
    out: dict[str, Any] = json.loads(run.stdout)
    assert run.returncode == 0 and out["state"] == "completed", (out.get("reason"), out.get("detail"), run.stderr)
    return out


@pytest.mark.slow  # about 12-25 s: started among the first, not last (tests/conftest.py)
def test_a_brief_delegated_right_after_a_resume_is_not_lost_in_the_replay(
    wired_ws, fake_agents_on_path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    log = tmp_path / "agents.jsonl"
    monkeypatch.setenv("MAM_FAKE_AGENT_LOG", str(log))
    monkeypatch.setenv("MAM_FAKE_GEMINI_REPLAY_S", "5")
    cwd = tmp_path / "project"
    cwd.mkdir()
    mam("session", "create", "--agent", "gemini", "--role", "dev", "--session", "gm", "--cwd", str(cwd), check=True)
    delegate("gm", "first brief")
    mam("session", "stop", "--session", "gm", check=True)

    resumed = json.loads(mam("session", "resume", "--session", "gm", "--json", check=True).stdout)
    assert resumed["ready_at"], "resume never saw the fake gemini ready"
    delegate("gm", "second brief")
    assert not events(log, "dropped"), events(log, "dropped")
    turns = [e["text"] for e in events(log, "turn") if e["pid"] == resumed["pane_pid"]]
    assert len(turns) == 1 and turns[0].startswith("second brief"), turns
