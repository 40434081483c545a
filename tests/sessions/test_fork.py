"""`mam session fork SRC --session NEW` with the demo agent in real panes (a real tmux, a real broker).

The demo agent has no fork of its own: mam copies its conversation file under a new id and resumes the
copy. Read from the outside: the conversation files in the workspace, `status --json`, tmux's panes,
the session audit log.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest

from mam.workspace import Workspace
from tests.helpers.jobs import FAST
from tests.helpers.mamcli import mam
from tests.sessions.conftest import pane_ids


@pytest.fixture
def wired_ws(workspace, mosquitto_broker, monkeypatch):
    for key, value in {**mosquitto_broker.env(), **FAST}.items():
        monkeypatch.setenv(key, value)
    return workspace


def delegate(name: str, brief: str) -> dict[str, Any]:
    run = mam(
        "job", "delegate", "--target", f"tmux:{name}", "--brief", brief,
        "--start-deadline", "30", "--timeout", "60", "--json", timeout=120,
    )  # fmt: skip
    out: dict[str, Any] = json.loads(run.stdout)
    assert run.returncode == 0 and out["state"] == "completed", (out.get("reason"), run.stderr)
    return out


def conversation(ws: Workspace, cid: str) -> dict[str, Any]:
    data: dict[str, Any] = json.loads((ws.state / "demo-agent" / "conversations" / f"{cid}.json").read_text())
    return data


def texts(convo: dict[str, Any]) -> list[str]:
    return [turn["text"] for turn in convo["turns"]]


def os_server() -> str:
    return os.environ["MAM_TMUX_SERVER"]


def status(name: str) -> dict[str, Any]:
    rows = json.loads(mam("session", "status", "--json", check=True).stdout)
    return next(r for r in rows if r["name"] == name)


def test_a_fork_starts_from_the_sources_messages_under_its_own_id(wired_ws: Workspace) -> None:
    ws = wired_ws
    mam("session", "create", "--agent", "demo", "--role", "dev", "--session", "src", check=True)
    delegate("src", "remember the word heliotrope")
    src = status("src")
    before = conversation(ws, src["conversation_id"])
    assert any("heliotrope" in t for t in texts(before)), texts(before)

    run = mam("session", "fork", "src", "--session", "copy", "--role", "reviewer", "--by", "alice@box", "--json")
    assert run.returncode == 0, run.stderr
    forked = json.loads(run.stdout)
    assert forked["forked_from"] == "src" and forked["conversation_id"] != src["conversation_id"]
    assert (forked["agent"], forked["role"], forked["cwd"], forked["permissions"], forked["backend"]) == (
        "demo", "reviewer", src["cwd"], src["permissions"], src["backend"],
    )  # fmt: skip
    row = status("copy")
    assert row["forked_from"] == "src" and row["pane_alive"] and row["status"] == "running"
    # The fork's own conversation holds the source's messages; the source's is as it was, its agent still running.
    assert texts(conversation(ws, forked["conversation_id"]))[: len(before["turns"])] == texts(before)
    assert conversation(ws, src["conversation_id"])["turns"] == before["turns"]
    after_src = status("src")
    assert (
        after_src["pane_alive"] and after_src["pane_id"] == src["pane_id"] and after_src["pane_pid"] == src["pane_pid"]
    )
    assert {src["pane_id"], forked["pane_id"]} <= set(pane_ids(os_server()))

    # A job delegated to the fork completes in the fork's conversation, not the source's.
    delegate("copy", "now say the word again")
    assert any("say the word again" in t for t in texts(conversation(ws, forked["conversation_id"])))
    assert conversation(ws, src["conversation_id"])["turns"] == before["turns"]

    lines = [json.loads(line) for line in (ws.state / "session-audit.jsonl").read_text().splitlines()]
    assert [(x["kind"], x["session"], x["source"], x["by"]) for x in lines] == [("fork", "copy", "src", "alice@box")]
    assert (ws.state / "session-audit.jsonl").stat().st_mode & 0o777 == 0o600


def test_refused_forks_write_nothing(wired_ws: Workspace) -> None:
    ws = wired_ws
    mam("session", "create", "--agent", "demo", "--role", "dev", "--session", "src", check=True)
    delegate("src", "a first job")
    mam("session", "create", "--agent", "demo", "--role", "dev", "--session", "other", check=True)
    convos = ws.state / "demo-agent" / "conversations"
    seen = sorted(p.name for p in convos.iterdir())
    rows = json.loads(mam("session", "status", "--json", check=True).stdout)
    panes = set(pane_ids(os_server()))

    cases = [
        (("nope", "--session", "new"), 5, "nope"),  # unknown source
        (("src", "--session", "other"), 5, "already exists"),  # NEW exists
        (("src", "--session", "src"), 5, "already exists"),
        (("src", "--session", "bad name;x"), 2, "session name"),
        (("src", "--session", "new", "--role", "$(x)"), 2, "role"),
        (("src", "--session", "new", "--by", "a\x1b[2Jb"), 2, "--by"),
    ]
    for args, code, words in cases:
        run = mam("session", "fork", *args)
        assert run.returncode == code, (args, run.returncode, run.stderr)
        assert words in run.stderr, (args, run.stderr)
        assert len(run.stderr.strip().splitlines()) == 1, run.stderr
    assert sorted(p.name for p in convos.iterdir()) == seen
    assert json.loads(mam("session", "status", "--json", check=True).stdout) == rows
    assert set(pane_ids(os_server())) == panes
    assert not (ws.state / "session-audit.jsonl").exists()


@pytest.mark.parametrize("agent", ["agy"])
def test_an_agent_that_cannot_fork_is_refused_in_one_line(
    wired_ws: Workspace, fake_agents_on_path: Path, agent: str
) -> None:
    mam("session", "create", "--agent", agent, "--role", "dev", "--session", "gk", check=True)
    rows = json.loads(mam("session", "status", "--json", check=True).stdout)
    run = mam("session", "fork", "gk", "--session", "gk2")
    assert run.returncode == 2 and "cannot fork" in run.stderr and len(run.stderr.strip().splitlines()) == 1, run.stderr
    assert json.loads(mam("session", "status", "--json", check=True).stdout) == rows


def test_a_registry_made_before_forks_gains_forked_from_empty(tmp_path: Path) -> None:
    """The migration adds `forked_from` ('' for every existing session) to a registry one version older."""
    import sqlite3

    from mam.store import db
    from mam.store.registry import Registry

    ws = Workspace(tmp_path / "old-ws")
    ws.ensure_state()
    conn = sqlite3.connect(str(ws.db_path), isolation_level=None)
    before = next(i for i, m in enumerate(db.MIGRATIONS) if any("ADD COLUMN forked_from" in s for s in m))
    for statements in db.MIGRATIONS[:before]:
        for statement in statements:
            conn.execute(statement)
    conn.execute(f"PRAGMA user_version={before}")
    conn.execute(
        "INSERT INTO sessions (name, agent, role, backend, server, cwd, status, created_at, updated_at) "
        "VALUES ('old', 'demo', 'dev', 'tmux', 's', '/', 'stopped', 1, 1)"
    )
    conn.close()
    registry = Registry(ws)
    try:
        assert registry.session("old").forked_from == ""
    finally:
        registry.close()
    conn = sqlite3.connect(str(ws.db_path))
    assert conn.execute("PRAGMA user_version").fetchone()[0] == db.SCHEMA_VERSION
    assert conn.execute("SELECT forked_from FROM sessions WHERE name = 'old'").fetchone() == ("",)
    conn.close()
