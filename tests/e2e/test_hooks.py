"""The agents' own lifecycle hooks, through the real `mam` CLI with the fake CLIs (which call the hooks
mam writes into the session's settings as the real ones do, tests/fakes/fake_hooks.py):

- Claude's hooks drive the session's and the job's `activity`;
- a tool call held by a permission prompt shows as the job's `waiting` (naming the tool), and a job
  that then ends by its deadline says so;
- a turn that ends without a report gets one reminder, typed into the input, and then reports;
- an agent that never reports ends `ended_without_report`, exit 1, after MAM_REMINDERS reminders;
- codex's notify program counts its turn ends the same way;
- `mam hook` itself exits 0 whatever it is fed, and gives up on a hook input that never ends.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from mam.jobs.record import read_audit
from mam.util.poll import wait_for
from mam.workspace import Workspace
from tests.helpers.jobs import FAST
from tests.helpers.mamcli import mam

REMIND = {"MAM_REMIND_AFTER_S": "1", "MAM_REMINDERS": "2"}


@pytest.fixture
def hooked(workspace: Workspace, amqtt_broker, monkeypatch, fake_agents_on_path) -> Workspace:  # type: ignore[no-untyped-def]
    for key, value in {**amqtt_broker.env(), **FAST, **REMIND}.items():
        monkeypatch.setenv(key, value)
    return workspace


def create(agent: str, name: str, log: Path | None = None) -> dict[str, Any]:
    env = {"MAM_FAKE_AGENT_LOG": str(log)} if log else {}
    out = mam("session", "create", "--agent", agent, "--role", "dev", "--session", name, "--json", check=True, env=env)
    return json.loads(out.stdout)  # type: ignore[no-any-return]


def usage_logged(log: Path, job: dict[str, Any]) -> dict[str, int]:
    """What the fake recorded for the model messages of the job's turns (its log, not the transcript)."""
    total = {"input_tokens": 0, "output_tokens": 0, "cache_read_tokens": 0, "cache_write_tokens": 0}
    for entry in map(json.loads, log.read_text().splitlines()):
        if entry["event"] == "usage" and job["claimed_ms"] <= entry["at_ms"] <= job["ended_ms"]:
            u = entry["usage"]
            total["input_tokens"] += u["input_tokens"]
            total["output_tokens"] += u["output_tokens"]
            total["cache_read_tokens"] += u["cache_read_input_tokens"]
            total["cache_write_tokens"] += u["cache_creation_input_tokens"]
    return total


def status(name: str) -> dict[str, Any]:
    rows = json.loads(mam("session", "status", "--json", check=True).stdout)
    return next(r for r in rows if r["name"] == name)  # type: ignore[no-any-return]


def delegate(name: str, brief: str, job_id: str, *, start_deadline: float = 60) -> tuple[int, dict[str, Any]]:
    run = mam(
        "job", "delegate", "--target", f"tmux:{name}", "--brief", brief, "--job-id", job_id,
        "--heartbeat", "30", "--start-deadline", str(start_deadline), "--timeout", "120", "--json",
        timeout=150,
    )  # fmt: skip
    return run.returncode, json.loads(run.stdout)


def activities(ws: Workspace, job_id: str) -> list[dict[str, Any]]:
    """The bodies of the `activity` events the job accepted, in order."""
    inputs = [line["input"] for line in read_audit(ws, job_id) if line.get("kind") == "input"]
    return [i["body"] for i in inputs if i.get("input") == "event" and i.get("type") == "activity"]


def kinds(ws: Workspace, job_id: str) -> list[str]:
    return [str(line.get("kind")) for line in read_audit(ws, job_id)]


def test_claudes_hooks_drive_the_session_and_job_activity(hooked: Workspace, tmp_path: Path) -> None:
    log = tmp_path / "agents.jsonl"
    create("claude", "cl", log)
    # SessionStart came from the hook at launch: not guessed from the process or the screen
    start = wait_for(lambda: status("cl") if status("cl")["activity_source"] == "hook" else None, timeout=20)
    assert start["activity"] == "idle" and start["activity_at"], start
    rc, out = delegate("cl", "work a while\nfake-work: 0.5", "job-hooks-1")
    assert rc == 0 and out["state"] == "completed", out
    seen = activities(hooked, "job-hooks-1")
    sources = [(a["state"], a["source"]) for a in seen]
    assert ("working", "UserPromptSubmit") in sources, sources
    tools = [a.get("tool", "") for a in seen if a["source"] == "PreToolUse"]
    assert tools and tools[0].startswith("Bash(mam event started --job job-hooks-1 "), tools
    # after the turn the session is idle, as its Stop hook said (the job had ended by then)
    after = wait_for(lambda: status("cl") if status("cl")["activity"] == "idle" else None, timeout=20)
    assert after["activity_source"] == "hook", after
    # the usage of the job's model messages, from the transcript, once per message
    usage = {k: v for k, v in out["usage"].items() if k != "messages"}
    assert usage == {**usage_logged(log, out), "source": "claude-transcript"}, out["usage"]
    assert out["usage"]["messages"] == 1
    view = json.loads(mam("job", "status", "job-hooks-1", "--json", check=True).stdout)
    assert view["usage"] == out["usage"]
    kinds = [e["kind"] for e in read_audit(hooked, "job-hooks-1")]
    assert [k for k in kinds if k != "budget_settled"][-1] == "usage", kinds  # the governor settles after it
    assert after["usage"]["input_tokens"] == out["usage"]["input_tokens"] and after["usage"]["jobs"] == 1


RECORD_STDIN = "import sys\nwith open(sys.argv[1], 'a') as f:\n    f.write(sys.stdin.read().strip() + '\\n')\n"


def test_a_permission_prompt_shows_as_waiting_and_the_deadline_says_why(hooked: Workspace, tmp_path: Path) -> None:
    # MAM_NOTIFY in the workspace's .mam.env (the pane never gets it: it is a secret): the wait is told once.
    script, told = tmp_path / "record.py", tmp_path / "told.jsonl"
    script.write_text(RECORD_STDIN)
    env_file = hooked.root / ".mam.env"
    env_file.write_text(f"MAM_NOTIFY={sys.executable} {script} {told}\n")
    env_file.chmod(0o600)
    create("claude", "perm")
    proc = subprocess.Popen(
        [sys.executable, "-m", "mam", "job", "delegate", "--target", "tmux:perm", "--brief",
         "please fake-ask-permission", "--job-id", "job-hooks-perm", "--start-deadline", "8", "--json"],
        stdout=subprocess.PIPE, text=True,
    )  # fmt: skip

    def waiting() -> dict[str, Any] | None:
        # The hook names the tool; the screen (the wrapper's nudge, when it looks first) only says it waits.
        view = json.loads(mam("job", "status", "job-hooks-perm", "--json").stdout or "{}")
        return view if (view.get("waiting") or {}).get("tool") else None

    try:
        view = wait_for(waiting, timeout=20, message="the job never showed waiting")
        assert view["waiting"]["tool"] == "Bash(touch /somewhere)" and view["waiting"]["since"], view
        assert view["state"] == "delivered", view  # waiting is a sub-state: the deadlines keep running
        assert status("perm")["activity"] == "waiting"
        out, _ = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
    record = json.loads(out)
    assert proc.returncode == 1 and record["reason"] == "agent_blocked", record
    assert record["detail"] == "waiting for permission: Bash(touch /somewhere)", record

    def messages() -> list[dict[str, Any]]:
        return [json.loads(line) for line in told.read_text().splitlines()] if told.is_file() else []

    wait_for(lambda: {m["kind"] for m in messages()} >= {"waiting", "job_ended"}, timeout=30, message="not told")
    waits = [m for m in messages() if m["kind"] == "waiting"]
    assert len(waits) == 1, waits  # the PreToolUse watcher and the later Notification hook are one wait
    assert waits[0]["job"] == "job-hooks-perm" and waits[0]["tool"] == "Bash(touch /somewhere)", waits


def test_a_turn_that_ends_without_a_report_gets_one_reminder_then_reports(hooked: Workspace, tmp_path: Path) -> None:
    log = tmp_path / "agents.jsonl"
    create("claude", "forgetful", log)
    rc, out = delegate("forgetful", "work\nfake-work: 0.2\nfake-report: on-reminder", "job-hooks-remind")
    assert rc == 0 and out["state"] == "completed", out
    reminded = [line for line in read_audit(hooked, "job-hooks-remind") if line.get("kind") == "reminded"]
    assert len(reminded) == 1 and reminded[0]["count"] == 1, reminded
    assert kinds(hooked, "job-hooks-remind").count("injected") == 1  # the brief was never pasted again
    assert out["usage"]["messages"] == 2 and out["usage"]["input_tokens"] == usage_logged(log, out)["input_tokens"]


def test_an_agent_that_never_reports_ends_ended_without_report(hooked: Workspace) -> None:
    create("claude", "silent")
    rc, out = delegate("silent", "work\nfake-work: 0.2\nfake-report: never", "job-hooks-never")
    assert rc == 1 and out["state"] == "failed" and out["reason"] == "ended_without_report", out
    assert kinds(hooked, "job-hooks-never").count("reminded") == 2
    assert out["turn_ends"] == 3, out


def test_codex_notify_counts_its_turn_ends_and_its_rollout_gives_the_usage(hooked: Workspace, tmp_path: Path) -> None:
    log = tmp_path / "agents.jsonl"
    create("codex", "cx", log)
    rc, out = delegate("cx", "work\nfake-work: 0.2\nfake-report: on-reminder", "job-hooks-cx")
    assert rc == 0 and out["state"] == "completed", out
    assert kinds(hooked, "job-hooks-cx").count("reminded") == 1
    assert [a["source"] for a in activities(hooked, "job-hooks-cx")][:1] == ["notify"]
    # both turns (the brief's, the reminder's): the second one's usage is written after `completed`
    # ran, as codex writes a response's token_count after its tool calls
    turns = [e["usage"] for e in map(json.loads, log.read_text().splitlines()) if e["event"] == "usage"]
    assert len(turns) == 2, turns
    assert out["usage"]["source"] == "codex-rollout", out["usage"]
    assert out["usage"]["input_tokens"] == sum(u["input_tokens"] for u in turns), (out["usage"], turns)
    assert out["usage"]["output_tokens"] == sum(u["output_tokens"] for u in turns), (out["usage"], turns)


def test_opencode_usage_comes_from_its_database(hooked: Workspace, tmp_path: Path) -> None:
    """opencode gets no hooks (docs/agents.md), but its database has each step's usage."""
    log = tmp_path / "agents.jsonl"
    create("opencode", "oc", log)
    rc, out = delegate("oc", "work\nfake-work: 0.2", "job-usage-oc")
    assert rc == 0 and out["state"] == "completed", out
    turns = [e["usage"] for e in map(json.loads, log.read_text().splitlines()) if e["event"] == "usage"]
    assert len(turns) == 1 and out["usage"]["source"] == "opencode-db", (turns, out["usage"])
    assert out["usage"]["input_tokens"] == turns[0]["input_tokens"]
    assert out["usage"]["cache_read_tokens"] == turns[0]["cache_read_input_tokens"]
    assert out["usage"]["cache_write_tokens"] == turns[0]["cache_creation_input_tokens"]


@pytest.mark.parametrize("payload", ["", "not json", "[1, 2]", '{"hook_event_name": "Stop"}'])
def test_mam_hook_exits_0_on_anything(hooked: Workspace, payload: str) -> None:
    proc = mam("hook", "claude", "--session", "nobody", input=payload, timeout=30)
    assert proc.returncode == 0 and proc.stdout == "", proc


def test_mam_hook_gives_up_on_an_input_that_never_ends(hooked: Workspace) -> None:
    """A CLI that never closes the hook's stdin (or a hook stuck on the registry) never holds the agent:
    `mam hook` ends by itself, exit 0."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "mam", "hook", "claude", "--session", "stuck"], stdin=subprocess.PIPE
    )
    try:
        assert proc.wait(timeout=30) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
        assert proc.stdin is not None
        proc.stdin.close()


@pytest.mark.slow  # about 12-25 s: started among the first, not last (tests/conftest.py)
def test_a_prompt_no_hook_reports_is_read_off_the_screen_into_waiting_and_the_detail(hooked: Workspace) -> None:
    # Codex tells mam nothing while it asks (its only hook is the turn's end): the wrapper, which never
    # presses Enter on a dialog, says what the screen shows instead of ending with an empty detail.
    create("codex", "cx")
    proc = subprocess.Popen(
        [sys.executable, "-m", "mam", "job", "delegate", "--target", "tmux:cx", "--brief",
         "please fake-ask-permission", "--job-id", "job-screen-perm", "--start-deadline", "6", "--json"],
        stdout=subprocess.PIPE, text=True,
    )  # fmt: skip

    def waiting() -> dict[str, Any] | None:
        view = json.loads(mam("job", "status", "job-screen-perm", "--json").stdout or "{}")
        return view if view.get("waiting") else None

    try:
        view = wait_for(waiting, timeout=20, message="the job never showed waiting")
        message = view["waiting"]["message"]
        assert message.startswith("codex shows a dialog or prompt (") and "mam session attach cx" in message, view
        assert view["state"] == "delivered", view
        out, _ = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    record = json.loads(out)
    assert proc.returncode == 1 and record["reason"] == "agent_blocked", record
    assert record["detail"] == f"waiting for input: {message}", record
    assert "dialog" in [line["kind"] for line in read_audit(hooked, "job-screen-perm")]
