"""The real opencode (1.18) in a real tmux pane, driven through mam's own CLI against the
scripted model server speaking Chat Completions (tests/real/openai_server.py), so opencode's own
`bash` tool runs the footer's commands exactly as printed.

The user's own opencode.json asks before every bash command (`"bash": {"*": "ask"}`): mam's
default `--permissions report` must let `mam event ...` through and nothing else. The module
shares one HOME, workspace, tmux server and model server; each test has its own session.
"""

from __future__ import annotations

import subprocess
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.helpers import brokers
from tests.helpers.tmux import private_tmux
from tests.real import _opencode_home as oc
from tests.real._known_gaps import opencode_ready_without_looking
from tests.real._scenario import delegate, event_types, explain, git_folder, make_rig
from tests.real.clis import BY_NAME
from tests.real.conftest import CACHE, Rig, skip_module_without
from tests.real.openai_server import ScriptedModel, chat_texts

skip_module_without("opencode")
pytestmark = pytest.mark.timeout(900)

# opencode starts in 6-7 s on an idle machine and runs a command 2-4 s after the model asks;
# under a loaded CI machine several times that.
START_S, JOB_S = 150, 300
USER_PERMISSION = {"bash": {"*": "ask"}}
# mam pastes the brief before opencode's input box exists: the paste is lost and the job ends
# agent_blocked. Marked only while mam's own wait_ready shows that gap.
PASTES_TOO_EARLY = pytest.mark.xfail(opencode_ready_without_looking(), run=False,
                                     reason="wait_ready skips adapters with no ready_marker and no dialog markers "
                                            "without calling their is_ready: opencode's brief is pasted before its box exists")


@pytest.fixture(scope="module")
def rig(tmp_path_factory: pytest.TempPathFactory, real_broker: brokers.RunningBroker) -> Iterator[Rig]:
    exe = BY_NAME["opencode"].executable(CACHE)
    assert exe is not None
    root = tmp_path_factory.mktemp("opencode-real")
    model = ScriptedModel(log_path=str(root / "model-requests.jsonl")).start()
    tmux = private_tmux()
    r = make_rig("opencode", exe, root, tmux=tmux, broker=real_broker, model=model, env=dict(oc.ENV))
    oc.write_config(r.home / ".config", base_url=model.base_url, permission=USER_PERMISSION)
    yield r
    r.stop_all()
    tmux.kill()
    model.stop()


def db(rig: Rig) -> Path:
    return oc.db_path(rig.home / ".local" / "share")


def test_the_cached_opencode_is_the_pinned_version(rig: Rig) -> None:
    out = subprocess.run([str(rig.exe), "--version"], env=rig.env, capture_output=True, text=True, timeout=60, check=False)
    assert out.returncode == 0 and out.stdout.strip() == BY_NAME["opencode"].version, out


@PASTES_TOO_EARLY
def test_delegate_in_a_fresh_folder_then_stop_and_resume_the_same_conversation(rig: Rig) -> None:
    """(a) delegate -> started -> progress -> completed -> exit 0, the brief once in opencode.db;
    (b) stop -> resume -> the model sees the earlier turns."""
    session = "oc-main"
    rig.create(session, cwd=git_folder(rig.ws.root / "fresh-repo"))
    first = delegate(rig, session, "Say hello.", timeout=JOB_S, start_deadline=START_S)
    assert first.rc == 0 and first.record.get("state") == "completed", explain(rig, session, first)
    kinds = event_types(rig, first.record["id"])
    assert [k for k in kinds if k in ("started", "progress", "completed")] == ["started", "progress", "completed"], kinds
    assert [c.split()[2] for c in first.commands(rig)] == ["started", "progress", "completed"]

    row = rig.status(session)
    assert row["status"] == "running" and rig.pane_alive(row["pane_id"]), row

    rig.mam_json("session", "stop", "--session", session)
    row = rig.status(session)
    assert row["status"] == "stopped" and row["conversation_id"], row
    conversation = row["conversation_id"]
    assert sum(first.tag in t for t in oc.user_texts(db(rig), conversation)) == 1
    # opencode recorded the usage the server sent, step by step (the title query aside); a stop
    # right after `completed` can beat the record of the closing reply, never another step's.
    sent = [r.usage["input_tokens"] for r in rig.model.snapshot()[first.model_from:] if r.reply != "side"]
    recorded = oc.step_input_tokens(db(rig), conversation)
    assert recorded in (sent, sent[:-1]), (recorded, sent)

    rig.mam_json("session", "resume", "--session", session)
    seen = len(rig.model.snapshot())
    second = delegate(rig, session, "Say hello again.", timeout=JOB_S, start_deadline=START_S)
    assert second.rc == 0 and second.record.get("state") == "completed", explain(rig, session, second)
    assert rig.status(session)["conversation_id"] == conversation
    turns = [r for r in rig.model.snapshot()[seen:] if r.api == "chat" and r.reply != "side"]
    assert turns, "the scripted model got no request after the resume"
    assert all(any(first.tag in t for t in chat_texts(r.body)) for r in turns)
    texts = oc.user_texts(db(rig), conversation)
    assert (sum(first.tag in t for t in texts), sum(second.tag in t for t in texts)) == (1, 1)


@PASTES_TOO_EARLY
def test_a_command_outside_the_allow_rules_leaves_the_prompt_and_the_job_ends_with_a_reason(rig: Rig) -> None:
    session = "oc-ask"
    cwd = git_folder(rig.ws.root / "ask-repo")
    rig.create(session, cwd=cwd)
    marker = cwd / f"asked-{uuid.uuid4().hex[:8]}"
    d = delegate(rig, session, f"Touch a file. {{tag}}\nRUN: touch {marker}", timeout=120, start_deadline=120, heartbeat=3)
    assert d.rc in (1, 2) and d.record.get("reason"), explain(rig, session, d)
    assert "started" in event_types(rig, d.record["id"])  # it reported, then waited for a person
    pane = rig.status(session)["pane_id"]
    assert oc.PROMPT_TEXT in rig.screen(pane), rig.shown(pane)
    assert not marker.exists()
