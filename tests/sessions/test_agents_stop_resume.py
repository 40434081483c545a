"""Stop and resume with each of the seven agent CLIs (the fakes in tests/fakes/, on PATH).

For every agent: create, one typed turn (the CLIs write their conversation only then), stop
(graceful; the row keeps the conversation id and is resumable), resume with the CLI's exact
resume argv in the same folder (read from the fake's own argv log), resume refused while it
runs, purge refused without --yes, purge with --yes deleting only that conversation, and
resume then refused with a message naming the conversation. One more claude session has its
transcript deleted by hand while it is stopped and resumable: resume must look at the disk,
not trust the row.

The six flows run concurrently (one thread each, every step a real `mam` process): four of
the CLIs choose their own conversation id, and create spends its discovery wait on each.
"""

from __future__ import annotations

import json
import os
import re
import sys
import time
import traceback
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest

from mam.agents import get_adapter
from mam.util.poll import wait_for
from tests.agents.conftest import AGENTS
from tests.conftest import FAKES_BIN
from tests.fakes.fake_stores import STORES
from tests.helpers.mamcli import mam
from tests.sessions.conftest import pane_ids, screen, type_line

WAIT = 20.0  # a deadline, not a delay
OWN_DELETE = {
    "codex": ["delete", "--force"],
    "opencode": ["session", "delete"],
    "hermes": ["sessions", "delete", "--yes"],
}
SPY = """#!{python}
import json, os, sys
if sys.argv[1:{n}] == {words!r}:
    with open({log!r}, "a") as f:
        f.write(json.dumps({{"agent": {agent!r}, "argv": sys.argv[1:]}}) + "\\n")
os.execv({fake!r}, [{fake!r}, *sys.argv[1:]])
"""


def spy_on_delete_commands(folder: Path, log: Path) -> Path:
    """Wrappers named codex/opencode/hermes that note each call of the CLI's delete command, then run the fake."""
    folder.mkdir()
    for agent, words in OWN_DELETE.items():
        path = folder / agent
        path.write_text(
            SPY.format(
                python=sys.executable,
                n=len(words) + 1,
                words=words,
                log=str(log),
                agent=agent,
                fake=str(FAKES_BIN / agent),
            )
        )
        path.chmod(0o755)
    return folder


def resume_argv(agent: str, cid: str) -> list[str]:
    """What each real CLI documents as its resume command (spelled out here, not taken from the adapter)."""
    return {
        "claude": ["claude", "--resume", cid],
        "codex": ["codex", "resume", cid],
        "agy": ["agy", "--conversation", cid],
        "hermes": ["hermes", "--resume", cid],
        "grok": ["grok", "--resume", cid],
        "opencode": ["opencode", "--session", cid],
        "gemini": ["gemini", "--resume", cid],
    }[agent]


class FakeLog:
    """The fakes' shared JSON-lines log (MAM_FAKE_AGENT_LOG): start, ready, turn, exit, error."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def events(self, **match: object) -> list[dict[str, Any]]:
        if not self.path.exists():
            return []
        found = []
        for line in self.path.read_text().splitlines():
            try:
                record = json.loads(line)
            except ValueError:
                continue  # a line still being written
            if all(record.get(k) == v for k, v in match.items()):
                found.append(record)
        return found

    def wait(self, event: str, **match: object) -> dict[str, Any]:
        """The first `event` whose fields include `match`, waiting for it up to WAIT seconds."""
        return wait_for(
            lambda: next(iter(self.events(event=event, **match)), None),
            timeout=WAIT,
            message=lambda: f"no {event} event with {match} in {self.path}",
        )


def seed_other_conversation(agent: str, env: dict[str, str], cwd: Path) -> str:
    """Another conversation of the same CLI in the same HOME, written as the fake CLI writes it."""
    store = STORES[agent](env, str(cwd))
    started = time.time() - 3600
    cid = store.new_id(started)
    store.create(cid, started)
    store.add_turn(cid, "user", "keep me", started + 1)
    return cid


def run_flow(agent: str, *, base: Path, log: FakeLog, tmux_name: str) -> None:
    name = f"s-{agent}"
    cwd = base / f"project-{agent}"
    cwd.mkdir()
    cwd = cwd.resolve()
    adapter = get_adapter(agent)

    row, cid = start_with_one_turn(agent, name, cwd, log=log, tmux_name=tmux_name)
    agent_env = row["agent_env"]
    first_pid = row["pane_pid"]

    stopped = mam("session", "stop", "--session", name, "--json")
    assert stopped.returncode == 0, f"stop: {stopped.stderr}"
    row = json.loads(stopped.stdout)
    assert (row["status"], row["resumable"], row["conversation_id"], row["pane_id"]) == ("stopped", True, cid, None)
    assert log.events(event="exit", pid=first_pid), "the agent did not exit gracefully"

    resumed = mam("session", "resume", "--session", name, "--json")
    assert resumed.returncode == 0, f"resume: {resumed.stderr}"
    row = json.loads(resumed.stdout)
    assert row["status"] == "running" and row["conversation_id"] == cid
    start = log.wait("start", pid=row["pane_pid"])
    expected = resume_argv(agent, cid)
    first_start = log.events(event="start", pid=first_pid)[0]["argv"]
    options = (
        first_start[len(first_start) - (len(start["argv"]) - len(expected)) :]
        if len(start["argv"]) > len(expected)
        else []
    )
    # the documented resume command, then the session's own options, the same as at launch (permissions kept;
    # opencode's delivery channel gets a new free port each launch)
    assert _any_port(start["argv"]) == _any_port(expected + options)
    assert start["cwd"] == str(cwd)
    log.wait("ready", pid=row["pane_pid"], conversation=cid)  # the CLI found the conversation and runs it

    starts = len(log.events(event="start", agent=agent))
    again = mam("session", "resume", "--session", name)
    assert again.returncode == 1, f"resume of a running session: {again.returncode} {again.stderr}"
    assert f"session {name!r} is already running (pane {row['pane_id']}); stop it first" in again.stderr

    other_cwd = base / f"other-{agent}"
    other_cwd.mkdir()
    other = seed_other_conversation(agent, agent_env, other_cwd.resolve())
    other_files = [
        p for p in adapter.conversation_files(other, cwd=str(other_cwd.resolve()), env=agent_env) if p.exists()
    ]

    refused = mam("session", "stop", "--session", name, "--purge-conversation")
    assert refused.returncode == 2, f"purge without --yes: {refused.returncode} {refused.stderr}"
    assert "add --yes to confirm" in refused.stderr
    assert adapter.conversation_exists(cid, cwd=str(cwd), env=agent_env), "purge without --yes deleted the conversation"
    pane = row["pane_id"]
    assert pane in pane_ids(tmux_name), "purge without --yes stopped the session"

    purged = mam("session", "stop", "--session", name, "--purge-conversation", "--yes", "--json")
    assert purged.returncode == 0, f"stop --purge-conversation --yes: {purged.stderr}"
    row = json.loads(purged.stdout)
    assert (row["status"], row["resumable"]) == ("stopped", False)
    assert f"conversation {cid} purged" in row["note"]
    if agent in OWN_DELETE:  # through the CLI's own delete command, found on the session's PATH
        spied = [json.loads(line) for line in (base.parent / "cli-deletes.jsonl").read_text().splitlines()]
        assert [e["argv"] for e in spied if e["agent"] == agent] == [[*OWN_DELETE[agent], cid]]
    assert not adapter.conversation_exists(cid, cwd=str(cwd), env=agent_env)
    assert not [p for p in adapter.conversation_files(cid, cwd=str(cwd), env=agent_env) if p.exists()]
    assert adapter.conversation_exists(other, cwd=str(other_cwd.resolve()), env=agent_env), (
        "the purge took another conversation"
    )
    assert all(p.exists() for p in other_files), [str(p) for p in other_files if not p.exists()]

    gone = mam("session", "resume", "--session", name)
    assert gone.returncode == 1, f"resume of a purged conversation: {gone.returncode} {gone.stderr}"
    assert f"{agent}: conversation {cid} not found" in gone.stderr, gone.stderr
    assert len(log.events(event="start", agent=agent)) == starts, "a refused resume launched the CLI"


def start_with_one_turn(
    agent: str, name: str, cwd: Path, *, log: FakeLog, tmux_name: str
) -> tuple[dict[str, Any], str]:
    """Create the session, type one line, and return (the created row, the conversation id)."""
    created = mam(
        "session", "create", "--agent", agent, "--role", "dev", "--session", name, "--cwd", str(cwd), "--json"
    )
    assert created.returncode == 0, f"create: {created.stderr}"
    row = json.loads(created.stdout)
    assert row["status"] == "running" and row["cwd"] == str(cwd)
    log.wait("ready", pid=row["pane_pid"], agent=agent)
    assert log.events(event="start", pid=row["pane_pid"])[0]["cwd"] == str(cwd)
    assert not log.events(event="error", agent=agent)

    # One typed line: the conversation exists on disk from its first turn on.
    type_line(tmux_name, row["pane_id"], f"hello {name}")
    try:
        turn = log.wait("turn", pid=row["pane_pid"], text=f"hello {name}")
    except Exception as e:
        raise AssertionError(f"{e}; screen:\n{screen(tmux_name, row['pane_id'])}") from e
    if row["conversation_id"] is not None:  # claude and grok take the id mam chose at launch
        assert row["conversation_id"] == turn["conversation"]
    return row, turn["conversation"]


def run_deleted_by_hand(*, base: Path, log: FakeLog, tmux_name: str) -> None:
    name = "claude-by-hand"
    cwd = base / name
    cwd.mkdir()
    cwd = cwd.resolve()
    row, cid = start_with_one_turn("claude", name, cwd, log=log, tmux_name=tmux_name)
    stopped = mam("session", "stop", "--session", name, "--json")
    assert stopped.returncode == 0, stopped.stderr
    assert json.loads(stopped.stdout)["resumable"] is True

    transcript = (
        Path(row["agent_env"]["HOME"])
        / ".claude"
        / "projects"
        / re.sub(r"[^A-Za-z0-9-]", "-", str(cwd))
        / f"{cid}.jsonl"
    )
    assert transcript.is_file()
    transcript.unlink()  # someone cleans up ~/.claude by hand

    # Count only this flow's launches: the main claude flow runs in another thread at the same time.
    starts = len(log.events(event="start", agent="claude", cwd=str(cwd)))
    gone = mam("session", "resume", "--session", name)
    assert gone.returncode == 1, f"resume of a deleted conversation: {gone.returncode} {gone.stderr}"
    assert f"claude: conversation {cid} not found (its files are gone)" in gone.stderr, gone.stderr
    assert len(log.events(event="start", agent="claude", cwd=str(cwd))) == starts, "a refused resume launched the CLI"


# Eight flows at once, each launching and resuming a fake CLI in a pane: in a full run at a load average of 12-24
# it passed the default 120 s timeout and was cut off. A bound, not a timing; over 120 s it also starts first.
@pytest.mark.timeout(360)
def test_each_agent_stops_resumes_and_purges_its_own_conversation(
    workspace: Any, tmux_server: Any, fake_agents_on_path: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    log = FakeLog(tmp_path / "fake-agents.jsonl")
    monkeypatch.setenv("MAM_FAKE_AGENT_LOG", str(log.path))
    spies = spy_on_delete_commands(tmp_path / "spy-bin", tmp_path / "cli-deletes.jsonl")
    monkeypatch.setenv("PATH", f"{spies}{os.pathsep}{os.environ['PATH']}")
    base = tmp_path / "projects"
    base.mkdir()

    def guarded(flow: str) -> str:
        try:
            if flow == "claude-by-hand":
                run_deleted_by_hand(base=base, log=log, tmux_name=tmux_server.name)
            else:
                run_flow(flow, base=base, log=log, tmux_name=tmux_server.name)
        except BaseException:
            return f"--- {flow} ---\n{traceback.format_exc()}"
        return ""

    flows = [*AGENTS, "claude-by-hand"]
    with ThreadPoolExecutor(max_workers=len(flows)) as pool:
        failures = [f for f in pool.map(guarded, flows) if f]
    assert not failures, "\n".join(failures)

    status = {r["name"]: r for r in json.loads(mam("session", "status", "--json", check=True).stdout)}
    assert sorted(status) == sorted([*(f"s-{a}" for a in AGENTS), "claude-by-hand"])
    assert {r["status"] for r in status.values()} == {"stopped"}
    assert not any(r["pane_alive"] for r in status.values())


def _any_port(argv: list[str]) -> list[str]:
    """`argv` with the value of a `--port` replaced by PORT."""
    return [("PORT" if i and argv[i - 1] == "--port" else a) for i, a in enumerate(argv)]
