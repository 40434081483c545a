"""--permissions ask|report|full and folder trust, through the real `mam` CLI with the fake CLIs
(which take the real ones' flags and show their trust dialogs and permission prompts).

- each mode launches the CLI with its own options, is recorded on the row, shown by status and
  kept on resume;
- by default the session's own cwd is recorded as trusted, and nothing else;
- with --no-trust, the dialog fails the create clearly and leaves no row and no pane;
- no brief is pasted, and no Enter pressed, into a pane that shows a permission prompt.
"""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path
from typing import Any

import pytest

from mam.errors import AgentDialog
from mam.sessions.create import dialog_message
from mam.util.proc import RUN_MODULE
from mam.workspace import Workspace
from tests.helpers.jobs import FAST
from tests.helpers.mamcli import mam, spawn_mam
from tests.sessions.test_agents_stop_resume import FakeLog

OPTIONS = {
    ("claude", "report"): ["--allowedTools", "Bash(mam event:*)"],
    ("claude", "full"): ["--dangerously-skip-permissions"],  # the bypass warning's pre-accept: in the settings file
    ("claude", "ask"): [],
    ("codex", "full"): ["--no-daemon", "-c", "allow_login_shell=false", "--dangerously-bypass-approvals-and-sandbox"],
    ("codex", "ask"): ["--no-daemon", "-c", "allow_login_shell=false"],
}


@pytest.fixture
def wired_ws(workspace, amqtt_broker, monkeypatch):
    for key, value in {**amqtt_broker.env(), **FAST}.items():
        monkeypatch.setenv(key, value)
    return workspace


def status(name: str) -> dict[str, Any]:
    rows = json.loads(mam("session", "status", "--json", check=True).stdout)
    return next(r for r in rows if r["name"] == name)


def panes(tmux_name: str) -> list[str]:
    out = subprocess.run(
        ["tmux", "-L", tmux_name, "list-panes", "-a", "-F", "#{pane_id}"], capture_output=True, text=True
    )
    return out.stdout.split() if out.returncode == 0 else []


@pytest.mark.parametrize(("agent", "mode"), sorted(OPTIONS))
def test_each_mode_launches_with_its_options_is_shown_and_kept_on_resume(
    agent: str, mode: str, workspace, fake_agents_on_path, tmp_path: Path
) -> None:
    log = FakeLog(tmp_path / "agents.jsonl")
    env = {"MAM_FAKE_AGENT_LOG": str(log.path)}
    extra = [] if mode == "report" else ["--permissions", mode]
    row = json.loads(
        mam(
            "session",
            "create",
            "--agent",
            agent,
            "--role",
            "dev",
            "--session",
            "s",
            "--json",
            *extra,
            env=env,
            check=True,
        ).stdout
    )
    assert row["permissions"] == mode and status("s")["permissions"] == mode
    first = python_named(log.wait("start", pid=row["pane_pid"])["argv"])
    expected = [*OPTIONS[(agent, mode)], *hook_options(agent, workspace, "s")]
    assert first[len(first) - len(expected) :] == expected
    if agent == "claude":
        settings = json.loads((workspace.session_dir("s") / "claude-settings.json").read_text())
        assert settings.get("skipDangerousModePermissionPrompt") is (True if mode == "full" else None)
        assert "mam hook claude --session s" in settings["hooks"]["Stop"][0]["hooks"][0]["command"]
    if agent == "claude":
        # the conversation must exist before it can be resumed: one turn
        log.wait("ready", pid=row["pane_pid"])
        subprocess.run(["tmux", "-L", workspace_tmux(), "send-keys", "-t", row["pane_id"], "-l", "hello"], check=True)
        subprocess.run(["tmux", "-L", workspace_tmux(), "send-keys", "-t", row["pane_id"], "Enter"], check=True)
        log.wait("turn", pid=row["pane_pid"])
        mam("session", "stop", "--session", "s", check=True)
        resumed = json.loads(mam("session", "resume", "--session", "s", "--json", env=env, check=True).stdout)
        again = log.wait("start", pid=resumed["pane_pid"])["argv"]
        assert again[:3] == ["claude", "--resume", row["conversation_id"]] and again[3:] == expected
        assert status("s")["permissions"] == mode


def hook_options(agent: str, ws: Workspace, session: str) -> list[str]:
    """What mam adds after the permission options: the session's own lifecycle hooks (mam.agents.hooks)."""
    if agent == "claude":
        return ["--settings", str(ws.session_dir(session) / "claude-settings.json")]
    argv = ["PYTHON", "-c", RUN_MODULE, "mam", "hook", "codex", "--session", session, "--workspace", str(ws.root)]
    return ["-c", "notify=[" + ",".join(json.dumps(a) for a in argv) + "]"]


def python_named(argv: list[str]) -> list[str]:
    """argv with mam's interpreter (the first item of codex's notify array) written PYTHON."""
    return [re.sub(r'^notify=\["[^"]*python[^"]*"', 'notify=["PYTHON"', a) for a in argv]


def workspace_tmux() -> str:
    import os

    return os.environ["MAM_TMUX_SERVER"]


def test_create_records_only_the_session_cwd_as_trusted(
    workspace, fake_agents_on_path, isolated_env: Path, tmp_path: Path
) -> None:
    state = isolated_env / ".claude.json"
    state.write_text(json.dumps({"hasCompletedOnboarding": True, "projects": {"/elsewhere": {"x": 1}}}))
    project = tmp_path / "project"
    project.mkdir()
    mam("session", "create", "--agent", "claude", "--role", "dev", "--session", "t", "--cwd", str(project), check=True)
    data = json.loads(state.read_text())
    assert data["hasCompletedOnboarding"] is True and data["projects"]["/elsewhere"] == {"x": 1}
    assert data["projects"][str(project.resolve())] == {"hasTrustDialogAccepted": True}
    assert set(data["projects"]) == {"/elsewhere", str(project.resolve())}
    assert status("t")["status"] == "running"


@pytest.mark.parametrize("agent", ["claude", "codex"])
def test_no_trust_fails_clearly_on_the_dialog_and_leaves_nothing(
    agent: str, workspace, fake_agents_on_path, isolated_env: Path, tmp_path: Path
) -> None:
    project = tmp_path / "checkout"
    (project / ".git").mkdir(parents=True)
    log = FakeLog(tmp_path / "agents.jsonl")
    # codex first draws its composer without its status line, then the trust question over it:
    # held 1.5 s here (the real 0.171 took ~1.2 s), long enough that a ready wait which took that
    # frame for ready would be seen to.
    proc = mam(
        "session",
        "create",
        "--agent",
        agent,
        "--role",
        "dev",
        "--session",
        "u",
        "--cwd",
        str(project),
        "--no-trust",
        env={"MAM_FAKE_AGENT_LOG": str(log.path), "MAM_FAKE_CODEX_EARLY_S": "1.5"},
    )
    assert proc.returncode == 1, proc.stderr
    assert f"the agent asks whether to trust {project.resolve()}" in proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1
    assert log.events(event="dialog", kind="trust")
    if agent == "codex":
        assert [e["event"] for e in log.events() if e["event"] in ("early", "dialog")] == ["early", "dialog"]
    assert not log.events(event="turn") and not log.events(event="exit")  # nothing answered it
    assert json.loads(mam("session", "status", "--json", check=True).stdout) == []
    assert panes(workspace_tmux()) == []
    assert not (isolated_env / ".claude.json").exists() and not (isolated_env / ".codex").exists()


def test_no_brief_and_no_enter_go_to_a_pane_that_shows_a_permission_prompt(
    wired_ws, fake_agents_on_path, tmp_path: Path, poll
) -> None:
    log = FakeLog(tmp_path / "agents.jsonl")
    env = {"MAM_FAKE_AGENT_LOG": str(log.path)}
    row = json.loads(
        mam(
            "session", "create", "--agent", "claude", "--role", "dev", "--session", "p", "--json", env=env, check=True
        ).stdout
    )
    first = spawn_mam(
        "job",
        "delegate",
        "--target",
        "p",
        "--brief",
        "please fake-ask-permission",
        "--job-id",
        "job-ask",
        "--start-deadline",
        "4",
        "--heartbeat",
        "1",
        "--json",
    )
    try:
        first.communicate(timeout=60)  # the fake never reports: the job ends agent_blocked, the prompt stays
        assert log.events(event="dialog", kind="prompt")
        second = mam(
            "job",
            "delegate",
            "--target",
            "p",
            "--brief",
            "second brief",
            "--job-id",
            "job-two",
            "--start-deadline",
            "4",
            "--json",
            timeout=60,
        )
        assert second.returncode == 5, second.stderr
        assert json.loads(second.stdout)["reason"] == "inject_failed"
        assert "permission prompt" in second.stdout + second.stderr
        assert len(log.events(event="turn", pid=row["pane_pid"])) == 1
        assert not log.events(event="prompt_answered") and not log.events(event="dropped")  # no Enter, no keystroke
    finally:
        if first.poll() is None:
            first.kill()
            first.communicate()


@pytest.mark.slow  # about 12-25 s: started among the first, not last (tests/conftest.py)
def test_status_says_plainly_what_a_session_may_do_beyond_reporting(workspace, fake_agents_on_path) -> None:
    """Issue 25, item 12: codex's `--permissions report` gives every sandboxed command network access and
    write access to `.mam/`, not only `mam event`: `session status --json` says so; `ask` grants neither."""
    for agent, mode, name in (("codex", "report", "cr"), ("codex", "ask", "ca"), ("claude", "report", "lr")):
        mam(
            "session", "create", "--agent", agent, "--role", "dev", "--session", name, "--permissions", mode, check=True
        )
    granted = status("cr")["beyond_reporting"]
    assert len(granted) == 2 and "network" in granted[0] and str(workspace.state) in granted[1], granted
    assert "--permissions ask" in granted[1]
    assert status("ca")["beyond_reporting"] == [] and status("lr")["beyond_reporting"] == []
    text = mam("session", "create", "--help", check=True).stdout
    assert "codex" in text and "beyond_reporting" in text


def test_a_launch_dialog_other_than_trust_is_named_with_how_to_answer_it() -> None:
    """What a failed create says about a dialog of the CLI's own (a first-run picker, a nudge)."""
    error = AgentDialog("claude shows a dialog in pane %3", kind="prompt", title="Choose the text style")
    said = dialog_message(error, command="claude", cwd="/w/p", trust=True)
    assert said == (
        "claude shows a dialog at launch: 'Choose the text style'; mam never answers one: run `claude` once "
        "yourself in a terminal in /w/p and answer it there (it is not asked again once answered), then create "
        "the session again. The session was not created"
    )
    assert "\n" not in said


@pytest.mark.parametrize("permissions", ["ask", "report"])
def test_claude_in_the_users_manual_mode_starts_without_the_auto_mode_nudge(
    permissions: str, workspace, fake_agents_on_path, isolated_env: Path, tmp_path: Path
) -> None:
    """The fake claude shows 2.1.332's "Make auto mode your default permission mode?" when only the
    user's settings choose a mode: mam's launch repeats that mode in the session's --settings file."""
    (isolated_env / ".claude").mkdir()
    mine = json.dumps({"permissions": {"defaultMode": "default"}})
    (isolated_env / ".claude" / "settings.json").write_text(mine)
    log = FakeLog(tmp_path / "agents.jsonl")
    mam(
        "session", "create", "--agent", "claude", "--role", "dev", "--session", "m", "--permissions", permissions,
        env={"MAM_FAKE_AGENT_LOG": str(log.path)}, check=True,
    )  # fmt: skip
    assert status("m")["status"] == "running"
    assert log.events(event="start") and not log.events(event="dialog")
    assert (isolated_env / ".claude" / "settings.json").read_text() == mine
