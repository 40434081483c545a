"""The real grok (xAI Grok Build 0.2.111) in a real tmux pane, driven through mam's own CLI
against the scripted model server speaking Chat Completions (tests/real/openai_server.py):
`[endpoints] xai_api_base_url` in `~/.grok/config.toml` points it at loopback, and its own
`run_terminal_command` tool runs the footer's commands. By default grok asks before every
command, so the job completes only if mam's `report` lets `mam event ...` through.
"""

from __future__ import annotations

import json
import subprocess
from collections.abc import Iterator

import pytest

from tests.helpers import brokers
from tests.helpers.tmux import private_tmux
from tests.real._scenario import delegate, event_types, explain, git_folder, make_rig
from tests.real.clis import BY_NAME
from tests.real.conftest import CACHE, Rig, skip_module_without
from tests.real.openai_server import ScriptedModel, chat_texts

skip_module_without("grok")
pytestmark = pytest.mark.timeout(600)

START_S, JOB_S = 90, 180


@pytest.fixture(scope="module")
def rig(tmp_path_factory: pytest.TempPathFactory, real_broker: brokers.RunningBroker) -> Iterator[Rig]:
    exe = BY_NAME["grok"].executable(CACHE)
    assert exe is not None
    root = tmp_path_factory.mktemp("grok-real")
    model = ScriptedModel(log_path=str(root / "model-requests.jsonl")).start()
    tmux = private_tmux()
    r = make_rig("grok", exe, root, tmux=tmux, broker=real_broker, model=model,
                 env={"XAI_API_KEY": "dummy-key-for-tests", "DISABLE_TELEMETRY": "1"})
    grok_home = r.home / ".grok"
    grok_home.mkdir(parents=True, exist_ok=True)
    (grok_home / "config.toml").write_text(
        f'[endpoints]\nxai_api_base_url = "{model.base_url}"\nmodels_base_url = "{model.base_url}"\n'
        '[models]\ndefault = "scripted-model"\n[features]\ntelemetry = false\n[cli]\nauto_update = false\n', encoding="utf-8")
    yield r
    r.stop_all()
    tmux.kill()
    model.stop()


def user_prompts(rig: Rig, conversation_id: str) -> list[str]:
    found = sorted((rig.home / ".grok" / "sessions").glob(f"*/{conversation_id}/chat_history.jsonl"))
    assert found, f"no chat history for {conversation_id}"
    out = []
    for line in found[0].read_text(encoding="utf-8").splitlines():
        entry = json.loads(line)
        if entry.get("type") == "user":
            out.append(json.dumps(entry.get("content")))
    return out


def test_the_cached_grok_is_the_pinned_version(rig: Rig) -> None:
    out = subprocess.run([str(rig.exe), "--version"], env=rig.env, capture_output=True, text=True, timeout=60, check=False)
    assert out.returncode == 0 and BY_NAME["grok"].version in out.stdout, out


def test_delegate_then_stop_and_resume_the_same_conversation(rig: Rig) -> None:
    session = "gk-main"
    rig.create(session, cwd=git_folder(rig.ws.root / "repo"))
    first = delegate(rig, session, "Say hello.", timeout=JOB_S, start_deadline=START_S)
    assert first.rc == 0 and first.record.get("state") == "completed", explain(rig, session, first)
    kinds = event_types(rig, first.record["id"])
    assert [k for k in kinds if k in ("started", "progress", "completed")] == ["started", "progress", "completed"], kinds

    rig.mam_json("session", "stop", "--session", session)
    row = rig.status(session)
    assert row["status"] == "stopped" and row["conversation_id"], row
    conversation = row["conversation_id"]
    assert sum(first.tag in t for t in user_prompts(rig, conversation)) == 1

    rig.mam_json("session", "resume", "--session", session)
    seen = len(rig.model.snapshot())
    second = delegate(rig, session, "Say hello again.", timeout=JOB_S, start_deadline=START_S)
    assert second.rc == 0 and second.record.get("state") == "completed", explain(rig, session, second)
    assert rig.status(session)["conversation_id"] == conversation
    turns = [r for r in rig.model.snapshot()[seen:] if r.api == "chat" and r.reply != "side"]
    assert turns and all(any(first.tag in t for t in chat_texts(r.body)) for r in turns)
    prompts = user_prompts(rig, conversation)
    assert (sum(first.tag in t for t in prompts), sum(second.tag in t for t in prompts)) == (1, 1)


def test_a_command_outside_the_allow_rules_leaves_the_prompt_and_the_job_ends_with_a_reason(rig: Rig) -> None:
    session = "gk-ask"
    cwd = git_folder(rig.ws.root / "ask-repo")
    rig.create(session, cwd=cwd)
    marker = cwd / "asked.txt"
    d = delegate(rig, session, f"Touch a file. {{tag}}\nRUN: touch {marker}", timeout=40, start_deadline=40, heartbeat=3)
    assert d.rc in (1, 2) and d.record.get("reason"), explain(rig, session, d)
    assert "started" in event_types(rig, d.record["id"])  # it reported, then waited for a person
    pane = rig.status(session)["pane_id"]
    screen = rig.screen(pane)
    assert "Yes, proceed" in screen and f"touch {marker}" in screen, rig.shown(pane)
    assert not marker.exists()
