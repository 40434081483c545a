"""The real Codex CLI (0.171) in real tmux panes, driven through mam's own CLI against the
scripted model server (tests/real/openai_server.py), so Codex's own tool system runs the
footer's commands.

One session is created once and reused by the scenarios, in order: a job that completes in a
fresh git folder Codex has never trusted; stop and resume into the same conversation; a command
outside the allow rules, which leaves Codex's approval prompt up and must not hang the job.
"""

from __future__ import annotations

import json
import os
import subprocess
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from tests.helpers import brokers
from tests.helpers.mamcli import MAM
from tests.helpers.tmux import PrivateTmux, private_tmux
from tests.real import _codex_home as cx
from tests.real.openai_server import ScriptedModel, responses_texts

if cx.codex_binary() is None:
    pytest.skip(f"real codex {cx.CODEX_VERSION} not installed at {cx.CODEX_BIN} (run tests/real/install_clis.sh)", allow_module_level=True)

SESSION = "cx-1"
APPROVAL = "Would you like to run the following command?"
TRUST = "Trust this folder?"


@dataclass
class World:
    root: Path
    ws: Path
    cwd: Path
    home: Path
    env: dict[str, str]
    tmux: PrivateTmux
    model: ScriptedModel
    tags: list[str] = field(default_factory=list)  # one per delegated brief, in order

    @property
    def codex_home(self) -> Path:
        return self.home / ".codex"

    def mam(self, *args: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
        return subprocess.run([MAM, *args], env=self.env, capture_output=True, text=True, timeout=timeout)

    def status(self) -> dict[str, Any]:
        proc = self.mam("session", "status", "--json")
        assert proc.returncode == 0, proc.stderr
        rows = [r for r in json.loads(proc.stdout) if r["name"] == SESSION]
        assert rows, proc.stdout
        return rows[0]  # type: ignore[no-any-return]

    def screen(self) -> str:
        pane = self.status().get("pane_id") or ""
        out = subprocess.run(["tmux", "-L", self.tmux.name, "capture-pane", "-p", "-J", "-t", pane], capture_output=True, text=True)
        return "\n".join(line.rstrip() for line in out.stdout.splitlines() if line.strip())

    def delegate(self, text: str, *extra: str, timeout: float = 150) -> tuple[str, subprocess.CompletedProcess[str], dict[str, Any]]:
        """Delegate `text` plus a unique tag; return (tag, process, job record)."""
        tag = f"BRIEF-{uuid.uuid4().hex[:12]}"
        self.tags.append(tag)
        brief = f"{text} {tag}" if "\n" not in text else text.replace("{tag}", tag)
        proc = self.mam("job", "delegate", "--target", f"tmux:{SESSION}", "--brief", brief, "--json", *extra, timeout=timeout)
        try:
            record = json.loads(proc.stdout)
        except ValueError:
            record = {}
        return tag, proc, record

    def events(self, job_id: str) -> list[str]:
        proc = self.mam("job", "log", job_id, "--json")
        assert proc.returncode == 0, proc.stderr
        inputs = [line.get("input") or {} for line in json.loads(proc.stdout) if line.get("kind") == "input"]
        return [str(i.get("type")) for i in inputs if i.get("input") == "event"]

    def explain(self, proc: subprocess.CompletedProcess[str]) -> str:
        return f"exit {proc.returncode}\nstdout: {proc.stdout}\nstderr: {proc.stderr}\nscreen:\n{self.screen()}\nmodel saw: {self.model.commands_run()}"


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory, amqtt_broker: brokers.RunningBroker) -> Iterator[World]:
    root = tmp_path_factory.mktemp("codex-real")
    home, ws, cwd = root / "home", root / "ws", root / "ws" / "project"
    for d in (home, ws, cwd):
        d.mkdir(parents=True)
    # A git folder: Codex asks "Trust this folder?" only in a repository it has not seen.
    subprocess.run(["git", "init", "-q", str(cwd)], check=True)
    model = ScriptedModel(log_path=str(root / "model-requests.jsonl")).start()
    cx.write_config(home / ".codex", base_url=model.base_url)
    tmux = private_tmux()
    path = os.pathsep.join([str(Path(MAM).parent), str(cx.CODEX_BIN.parent), "/usr/local/bin", "/usr/bin", "/bin"])
    env = {
        "PATH": path, "HOME": str(home), "CODEX_HOME": str(home / ".codex"), "SHELL": "/bin/bash",
        "TERM": "xterm-256color", "LANG": "C.UTF-8", "TMPDIR": str(root),
        "XDG_CONFIG_HOME": str(home / ".config"), "XDG_DATA_HOME": str(home / ".local/share"),
        "XDG_STATE_HOME": str(home / ".local/state"), "XDG_CACHE_HOME": str(home / ".cache"),
        cx.KEY_VAR: "dummy-key-for-tests", "MAM_WORKSPACE": str(ws), "MAM_TMUX_SERVER": tmux.name,
        "MAM_POLL_S": "0.05", **amqtt_broker.env(),
    }
    w = World(root=root, ws=ws, cwd=cwd, home=home, env=env, tmux=tmux, model=model)
    yield w
    w.mam("session", "stop", "--session", SESSION, timeout=60)
    tmux.kill()
    model.stop()


def test_delegate_in_a_fresh_git_folder_completes_and_the_brief_is_in_the_rollout_once(world: World) -> None:
    create = world.mam("session", "create", "--agent", "codex", "--role", "dev", "--session", SESSION, "--cwd", str(world.cwd), "--json")
    assert create.returncode == 0, world.explain(create)
    tag, proc, record = world.delegate("Say hello.", "--start-deadline", "60", "--heartbeat", "30", "--timeout", "120")
    assert proc.returncode == 0, world.explain(proc)
    assert record["state"] == "completed", record
    assert world.events(record["id"])[:1] == ["started"]
    assert {"progress", "completed"} <= set(world.events(record["id"]))

    # The trust question neither ended Codex nor ate the brief: the same pane, the brief once.
    screen = world.screen()
    assert TRUST not in screen, screen
    row = world.status()
    assert row["status"] == "running", row
    assert row["conversation_id"], row
    rollout = cx.rollout_of(world.codex_home, row["conversation_id"])
    assert rollout is not None, f"no rollout for {row['conversation_id']} in {cx.rollouts(world.codex_home)}"
    assert cx.user_turns_holding(rollout, tag) == 1
    # Codex's own shell tool ran each footer command: the model was shown each one's output.
    assert [c.split()[2] for c in world.model.commands_run()] == ["started", "progress", "completed"]


def test_stop_then_resume_reopens_the_same_conversation(world: World) -> None:
    first_tag, conversation = world.tags[0], world.status()["conversation_id"]
    stop = world.mam("session", "stop", "--session", SESSION, "--json")
    assert stop.returncode == 0, world.explain(stop)
    assert world.status()["status"] == "stopped"
    resume = world.mam("session", "resume", "--session", SESSION, "--json")
    assert resume.returncode == 0, world.explain(resume)
    seen = len(world.model.snapshot())

    tag, proc, record = world.delegate("Say hello again.", "--start-deadline", "60", "--heartbeat", "30", "--timeout", "120")
    assert proc.returncode == 0, world.explain(proc)
    assert record["state"] == "completed", record
    row = world.status()
    assert row["conversation_id"] == conversation
    # The model was shown the first job's brief again: Codex reopened that conversation.
    turns = [r for r in world.model.snapshot()[seen:] if r.api == "responses" and r.reply != "side"]
    assert turns, "the scripted model got no request after the resume"
    assert all(any(first_tag in t for t in responses_texts(r.body)) for r in turns)
    rollout = cx.rollout_of(world.codex_home, conversation)
    assert rollout is not None
    assert (cx.user_turns_holding(rollout, first_tag), cx.user_turns_holding(rollout, tag)) == (1, 1)


def test_a_command_outside_the_allow_rules_leaves_the_prompt_and_the_job_ends_with_a_reason(world: World) -> None:
    outside = world.root / f"outside-{uuid.uuid4().hex[:8]}"
    text = f"Touch a file outside the project. {{tag}}\nRUN-ESCALATED: touch {outside}"
    tag, proc, record = world.delegate(text, "--start-deadline", "60", "--heartbeat", "2", "--timeout", "40", timeout=90)
    assert proc.returncode in (1, 2), world.explain(proc)
    assert record.get("state") in ("failed", "timed_out") and record.get("reason"), record
    assert "started" in world.events(record["id"])  # it got as far as reporting, then waited
    screen = world.screen()
    assert APPROVAL in screen and str(outside) in screen, screen
    assert not outside.exists()
