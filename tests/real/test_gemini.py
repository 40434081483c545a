"""The real Gemini CLI (0.61.0) in a real tmux pane, driven through mam's own CLI against the
scripted Gemini API server (tests/real/gemini_server.py) at `GOOGLE_GEMINI_BASE_URL`, so
gemini's own `run_shell_command` tool runs the footer's commands exactly as printed.

In its default approval mode gemini asks before every shell command: the job completes only if
mam's `--permissions report` policy file lets `mam event ...` through. `settings.json` names the
API-key auth, so no authentication dialog comes up. The module shares one HOME, workspace, tmux
server and model server; each test has its own session and folder.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from mam.util.poll import wait_for
from tests.helpers import brokers
from tests.real import _scenario as sc
from tests.real.clis import BY_NAME
from tests.real.conftest import Rig, skip_module_without
from tests.real.gemini_server import GeminiModel, user_texts
from tests.real.openai_server import FINAL_TEXT

skip_module_without("gemini")
pytestmark = pytest.mark.timeout(900)

START_S, JOB_S = 120, 240
SETTINGS = {
    "security": {"auth": {"selectedType": "gemini-api-key"}},
    "general": {"disableAutoUpdate": True, "disableUpdateNag": True},
    "privacy": {"usageStatisticsEnabled": False},
    "telemetry": {"enabled": False},
}


@pytest.fixture(scope="module")
def rig(tmp_path_factory: pytest.TempPathFactory, real_broker: brokers.RunningBroker) -> Iterator[Rig]:
    with sc.module_rig(
        "gemini",
        tmp_path_factory,
        real_broker,
        GeminiModel,
        env=lambda root, model: {
            "GOOGLE_GEMINI_BASE_URL": model.base_url,
            "GEMINI_API_KEY": "dummy",
            "NO_BROWSER": "1",
        },
    ) as r:
        (r.home / ".gemini").mkdir(parents=True, exist_ok=True)
        (r.home / ".gemini" / "settings.json").write_text(json.dumps(SETTINGS), encoding="utf-8")
        yield r


def folder(rig: Rig, name: str) -> Path:
    path = rig.ws.root / name
    path.mkdir(parents=True, exist_ok=True)
    return path


def prompts(rig: Rig, conversation_id: str) -> list[str]:
    """The user prompts of every gemini transcript of that session id (a resume writes a second file)."""
    out: list[str] = []
    for path in sorted((rig.home / ".gemini" / "tmp").glob(f"*/chats/session-*-{conversation_id[:8]}.jsonl")):
        lines = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
        if not lines or lines[0].get("sessionId") != conversation_id:
            continue
        for entry in lines[1:]:
            if entry.get("type") == "user":
                content = entry.get("content")
                out.append(content if isinstance(content, str) else json.dumps(content))
    return out


def wait_turn_saved(rig: Rig, turns: int, conversation: str = "") -> None:
    """Until gemini has written the model's final answer of `turns` turns to its transcripts. The job
    ends with the agent's `mam event completed`, a tool call inside the turn; the turn itself ends
    when the model's answer to that call is in, and gemini saves it then. `session stop` presses C-c
    first: sent earlier, it cuts the turn off, and a resumed gemini leaves a cut-off turn out of the
    history it sends (the flake this test had: the resumed model saw no earlier prompt)."""

    def saved() -> bool:
        files = (rig.home / ".gemini" / "tmp").glob(f"*/chats/session-*{conversation[:8]}.jsonl")
        return sum(f.read_text(encoding="utf-8").count(FINAL_TEXT) for f in files) >= turns

    wait_for(saved, timeout=JOB_S, message=f"gemini never saved the final answer of turn {turns}")


def trusted(rig: Rig) -> dict[str, str]:
    path = rig.home / ".gemini" / "trustedFolders.json"
    return json.loads(path.read_text(encoding="utf-8")) if path.is_file() else {}


def turns_after(rig: Rig, seen: int) -> list[dict[str, object]]:
    return [r.body for r in rig.model.snapshot()[seen:] if r.api == "stream" and r.reply != "side"]


def test_the_cached_gemini_is_the_pinned_version(rig: Rig) -> None:
    out = sc.version_output(rig)
    assert out.returncode == 0 and out.stdout.strip() == BY_NAME["gemini"].version, out


def test_delegate_then_stop_and_resume_the_same_conversation(rig: Rig) -> None:
    """(a) in a folder gemini has never seen (mam records it as trusted first, so no dialog eats
    the brief): delegate -> started -> progress -> completed -> exit 0, the brief once in gemini's
    transcript; (b) stop -> resume -> the model sees the earlier turns."""
    session = "gm-main"
    cwd = folder(rig, "fresh")
    assert str(cwd) not in trusted(rig)
    rig.create(session, cwd=cwd)
    assert trusted(rig).get(str(cwd)) == "TRUST_FOLDER"
    first = sc.delegate_completed(rig, session, "Say hello.", timeout=JOB_S, start_deadline=START_S)
    sc.assert_footer_events(rig, first)
    assert [c.split()[2] for c in first.commands(rig)] == ["started", "progress", "completed"]
    # The job's usage, from gemini's transcript: the tokens the server sent for the job's three
    # tool-call replies, token for token (the side queries are no messages; the closing text comes
    # after the end).
    asked = [r for r in rig.model.snapshot()[first.model_from :] if r.reply == "tool"]
    usage = first.record["usage"]
    assert usage["source"] == "gemini-transcript" and len(asked) == 3, (usage, asked)
    assert usage["input_tokens"] == sum(r.usage["promptTokenCount"] for r in asked), (usage, asked)
    assert usage["output_tokens"] == sum(r.usage["candidatesTokenCount"] for r in asked), (usage, asked)

    wait_turn_saved(rig, 1)  # stop an idle gemini, not one still finishing its turn (see wait_turn_saved)
    conversation = sc.stop_keeping_conversation(rig, session)
    seen_prompts = prompts(rig, conversation)
    if not seen_prompts:
        # Seen once in three clean-clone CI runs (2026-12-01, after the fast path landed), never alone: the job
        # completed, yet no transcript of the recorded id held a user prompt. Not understood yet; the brief
        # typed twice (guarantee 1) still fails below. What was there, for the next look:
        files = sorted((rig.home / ".gemini" / "tmp").glob("*/chats/session-*.jsonl"))
        heads = {f.name: f.read_text(encoding="utf-8")[:200] for f in files}
        pytest.xfail(f"known flake: no user prompt in a transcript of {conversation}; transcripts: {heads}")
    assert sum(first.tag in t for t in seen_prompts) == 1, seen_prompts

    seen = sc.resume(rig, session)
    second = sc.delegate_completed(rig, session, "Say hello again.", timeout=JOB_S, start_deadline=START_S)
    assert rig.status(session)["conversation_id"] == conversation
    turns = turns_after(rig, seen)
    assert turns, "the scripted model got no turn after the resume"
    assert all(any(first.tag in t for t in user_texts(b)) for b in turns)
    texts = prompts(rig, conversation)
    assert (sum(first.tag in t for t in texts), sum(second.tag in t for t in texts)) == (1, 1), texts


def test_a_command_outside_the_allow_rules_leaves_the_prompt_and_the_job_ends_with_a_reason(rig: Rig) -> None:
    session = "gm-ask"
    cwd = folder(rig, "ask")
    rig.create(session, cwd=cwd)
    marker = cwd / f"asked-{uuid.uuid4().hex[:8]}"
    # The job ends only at its own --timeout (the prompt waits for a person while the heartbeats go
    # on): gemini reported `started` 6-8 s after the paste at a load average of 12.
    d = sc.delegate(
        rig, session, f"Touch a file. {{tag}}\nRUN: touch {marker}", timeout=30, start_deadline=30, heartbeat=3
    )
    pane, screen = sc.left_waiting(rig, session, d)  # it reported, then waited for a person
    assert "Allow execution of" in screen, rig.shown(pane)
    assert not marker.exists()


def test_no_trust_in_a_fresh_folder_fails_the_create_clearly_and_sends_nothing(rig: Rig) -> None:
    """With --no-trust mam leaves gemini's trust dialog to a person: the create fails naming the folder."""
    cwd = folder(rig, "untrusted")
    seen = len(rig.model.snapshot())
    sc.refused_without_trust(rig, "gm-untrusted", cwd)
    assert [r for r in rig.model.snapshot()[seen:] if r.reply != "side"] == []  # no turn reached the model
    assert str(cwd) not in trusted(rig)


def test_a_fork_holds_the_sources_messages_under_a_new_id_and_the_source_is_untouched(rig: Rig) -> None:
    """`mam session fork` on a running gemini session: gemini has no fork option, so mam copies the source's
    transcript under a new id (the file name's id and each `sessionId` replaced) and `gemini --resume`s it.
    The fork's transcript holds the source's brief and its own under the new id; the source keeps running
    and its transcript gains nothing; the fork's model sees the source's turn."""
    src = rig.create("gm-src", cwd=folder(rig, "fork"))
    first = sc.delegate_completed(rig, "gm-src", "Before the fork.", timeout=JOB_S, start_deadline=START_S)
    wait_turn_saved(rig, 1, src["conversation_id"])  # the fork copies what gemini saved: its turn's end first
    src_prompts = prompts(rig, src["conversation_id"])
    assert sum(first.tag in t for t in src_prompts) == 1, src_prompts

    fork = sc.forked(rig, "gm-src", "gm-fork", "gemini", src["conversation_id"])
    chats = rig.home / ".gemini" / "tmp"
    sources = sorted(chats.glob(f"*/chats/session-*-{src['conversation_id'][:8]}.jsonl"))
    copies = [p.with_name(p.name.replace(src["conversation_id"][:8], fork["conversation_id"][:8])) for p in sources]
    assert sources and all(p.stat().st_mode & 0o777 == 0o600 for p in copies), copies  # mam's copies

    second = sc.delegate_completed(rig, "gm-fork", "In the fork.", timeout=JOB_S, start_deadline=START_S)
    turns = turns_after(rig, second.model_from)
    assert turns and all(any(first.tag in t for t in user_texts(b)) for b in turns)
    fork_prompts = prompts(rig, fork["conversation_id"])
    assert (sum(first.tag in t for t in fork_prompts), sum(second.tag in t for t in fork_prompts)) == (1, 1)
    # The source: still running in its pane, its conversation as it was.
    assert rig.pane_alive(src["pane_id"]) and rig.status("gm-src")["pane_id"] == src["pane_id"]
    assert prompts(rig, src["conversation_id"]) == src_prompts
