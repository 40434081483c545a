"""The real grok (xAI Grok Build 0.2.111) in a real tmux pane, driven through mam's own CLI
against the scripted model server speaking Chat Completions (tests/real/openai_server.py):
`[endpoints] xai_api_base_url` in `~/.grok/config.toml` points it at loopback, and its own
`run_terminal_command` tool runs the footer's commands. By default grok asks before every
command, so the job completes only if mam's `report` lets `mam event ...` through.
"""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest

from tests.helpers import brokers
from tests.real import _scenario as sc
from tests.real.clis import BY_NAME
from tests.real.conftest import Rig, skip_module_without
from tests.real.openai_server import ScriptedModel, chat_texts

skip_module_without("grok")
pytestmark = pytest.mark.timeout(600)

START_S, JOB_S = 90, 180


@pytest.fixture(scope="module")
def rig(tmp_path_factory: pytest.TempPathFactory, real_broker: brokers.RunningBroker) -> Iterator[Rig]:
    with sc.module_rig(
        "grok",
        tmp_path_factory,
        real_broker,
        ScriptedModel,
        env=lambda root, model: {"XAI_API_KEY": "dummy-key-for-tests", "DISABLE_TELEMETRY": "1"},
    ) as r:
        grok_home = r.home / ".grok"
        grok_home.mkdir(parents=True, exist_ok=True)
        url = r.model.base_url
        (grok_home / "config.toml").write_text(
            f'[endpoints]\nxai_api_base_url = "{url}"\nmodels_base_url = "{url}"\n'
            '[models]\ndefault = "scripted-model"\n[features]\ntelemetry = false\n[cli]\nauto_update = false\n',
            encoding="utf-8",
        )
        yield r


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
    out = sc.version_output(rig)
    assert out.returncode == 0 and BY_NAME["grok"].version in out.stdout, out


def test_delegate_then_stop_and_resume_the_same_conversation(rig: Rig) -> None:
    session = "gk-main"
    rig.create(session, cwd=sc.git_folder(rig.ws.root / "repo"))
    first = sc.delegate_completed(rig, session, "Say hello.", timeout=JOB_S, start_deadline=START_S)
    sc.assert_footer_events(rig, first)
    sc.assert_turn_usage(rig, first, "grok-updates")

    conversation = sc.stop_keeping_conversation(rig, session)
    assert sum(first.tag in t for t in user_prompts(rig, conversation)) == 1

    seen = sc.resume(rig, session)
    second = sc.delegate_completed(rig, session, "Say hello again.", timeout=JOB_S, start_deadline=START_S)
    sc.assert_turn_usage(rig, second, "grok-updates")  # the resumed session's earlier turn not counted again
    assert rig.status(session)["conversation_id"] == conversation
    turns = [r for r in rig.model.snapshot()[seen:] if r.api == "chat" and r.reply != "side"]
    assert turns and all(any(first.tag in t for t in chat_texts(r.body)) for r in turns)
    prompts = user_prompts(rig, conversation)
    assert (sum(first.tag in t for t in prompts), sum(second.tag in t for t in prompts)) == (1, 1)


def test_a_command_outside_the_allow_rules_leaves_the_prompt_and_the_job_ends_with_a_reason(rig: Rig) -> None:
    session = "gk-ask"
    cwd = sc.git_folder(rig.ws.root / "ask-repo")
    rig.create(session, cwd=cwd)
    marker = cwd / "asked.txt"
    d = sc.delegate(
        rig, session, f"Touch a file. {{tag}}\nRUN: touch {marker}", timeout=25, start_deadline=25, heartbeat=3
    )
    pane, screen = sc.left_waiting(rig, session, d)  # it reported, then waited for a person
    assert "Yes, proceed" in screen and f"touch {marker}" in screen, rig.shown(pane)
    assert not marker.exists()
    # grok calls no hook of mam's: its events.jsonl said so (permission_requested, never resolved)
    assert "waiting for permission: run_terminal_command" in d.record["detail"], d.record
    waits = [a for a in sc.activity_inputs(rig, d.record["id"]) if a["state"] == "waiting"]
    assert [a["source"] for a in waits] == ["permission_requested"], waits
    row = rig.status(session)
    assert (row["activity"], row["activity_source"]) == ("waiting", "store"), row


def test_a_turn_ended_without_a_report_is_reminded_then_ends_the_job(rig: Rig) -> None:
    """grok's turn ends, read from its events.jsonl (`turn_ended`), drive mam's reminders: a model that
    runs `started` and ends its turn (and answers the reminder with a text) gets MAM_REMINDERS reminders
    typed, then the job ends `ended_without_report`, exit 1."""
    session = "gk-forget"
    sc.reminded_then_ended_without_report(
        rig, session, turn_end="turn_ended", source="store", timeout=JOB_S, start_deadline=START_S
    )


def test_a_fork_holds_the_sources_messages_under_a_new_id_and_the_source_is_untouched(rig: Rig) -> None:
    """`mam session fork` on a running grok session: `grok --resume SRC --fork-session --session-id NEW`.
    The fork's own chat history (its session folder) holds the source's brief and its own under the new
    id; the source keeps running and its history gains nothing; the fork's model sees the source's turn."""
    src = rig.create("gk-src", cwd=sc.git_folder(rig.ws.root / "fork-repo"))
    first = sc.delegate_completed(rig, "gk-src", "Before the fork.", timeout=JOB_S, start_deadline=START_S)
    src_prompts = user_prompts(rig, src["conversation_id"])
    assert sum(first.tag in t for t in src_prompts) == 1, src_prompts

    fork = sc.forked(rig, "gk-src", "gk-fork", "grok", src["conversation_id"])

    second = sc.delegate_completed(rig, "gk-fork", "In the fork.", timeout=JOB_S, start_deadline=START_S)
    turns = [r for r in rig.model.snapshot()[second.model_from :] if r.api == "chat" and r.reply != "side"]
    assert turns and all(any(first.tag in t for t in chat_texts(r.body)) for r in turns)
    fork_prompts = user_prompts(rig, fork["conversation_id"])
    assert (sum(first.tag in t for t in fork_prompts), sum(second.tag in t for t in fork_prompts)) == (1, 1)
    # The source: still running in its pane, its conversation as it was.
    assert rig.pane_alive(src["pane_id"]) and rig.status("gk-src")["pane_id"] == src["pane_id"]
    assert user_prompts(rig, src["conversation_id"]) == src_prompts
