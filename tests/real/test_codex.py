"""The real Codex CLI (0.171) in a real tmux pane, driven through mam's own CLI against the
scripted model server (tests/real/openai_server.py), so Codex's own tool system runs the
footer's commands exactly as printed.

The module shares one HOME, workspace, tmux server and model server; each test has its own
session (so the tests stay independent under xdist): a job that completes in a fresh git folder
Codex has never trusted, then stop and resume into the same conversation; `--no-trust` in such a
folder; a command outside the allow rules, which leaves Codex's approval prompt up and must not
hang the job.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.helpers import brokers
from tests.real import _codex_home as cx
from tests.real import _scenario as sc
from tests.real.clis import BY_NAME
from tests.real.conftest import Rig, skip_module_without
from tests.real.openai_server import responses_texts

skip_module_without("codex")
pytestmark = pytest.mark.timeout(420)


@pytest.fixture(scope="module")
def rig(tmp_path_factory: pytest.TempPathFactory, real_broker: brokers.RunningBroker) -> Iterator[Rig]:
    with cx.module_rig(tmp_path_factory, real_broker) as r:
        yield r


def codex_home(rig: Rig) -> Path:
    return rig.home / ".codex"


def test_the_cached_codex_is_the_pinned_version(rig: Rig) -> None:
    out = sc.version_output(rig)
    assert out.returncode == 0 and out.stdout.strip().endswith(BY_NAME["codex"].version), out


def test_delegate_in_a_fresh_git_folder_then_stop_and_resume_the_same_conversation(rig: Rig) -> None:
    """(a) delegate -> started -> progress -> completed -> exit 0 in a repository Codex has never
    trusted, the brief once in the rollout; (b) stop -> resume -> the model sees the earlier turns."""
    session = "cx-main"
    rig.create(session, cwd=sc.git_folder(rig.ws.root / "fresh-repo"))
    first = sc.delegate_completed(rig, session, "Say hello.")
    sc.assert_footer_events(rig, first)
    # Codex's own shell tool ran each footer command, as printed, one tool result each.
    assert [c.split()[2] for c in first.commands(rig)] == ["started", "progress", "completed"]
    # The job's usage, from Codex's rollout: the tokens the server sent for the job's three tool-call
    # replies, token for token (the title query is a thread of its own; the closing text comes after the end).
    asked = [r for r in rig.model.snapshot()[first.model_from :] if r.reply == "tool"]
    usage = first.record["usage"]
    assert usage["source"] == "codex-rollout" and len(asked) == 3, (usage, asked)
    assert usage["input_tokens"] == sum(r.usage["input_tokens"] for r in asked), usage
    assert usage["output_tokens"] == sum(r.usage["output_tokens"] for r in asked), usage

    # The trust question neither ended Codex nor ate the brief.
    row = rig.status(session)
    assert row["status"] == "running" and rig.pane_alive(row["pane_id"]), row
    assert cx.TRUST_TEXT not in rig.screen(row["pane_id"])

    # Codex writes its rollout at the first turn; mam learns the id from it by the stop at the latest.
    conversation = sc.stop_keeping_conversation(rig, session)
    rollout = cx.rollout_of(codex_home(rig), conversation)
    assert rollout is not None, f"no rollout for {conversation} in {cx.rollouts(codex_home(rig))}"
    assert cx.user_turns_holding(rollout, first.tag) == 1
    # Codex added up the usage the server sent for the job's turns (the title query aside); a stop
    # right after `completed` may beat the record of the closing reply, never another turn's.
    sent = [r.usage["input_tokens"] for r in rig.model.snapshot()[first.model_from :] if r.reply != "side"]
    assert cx.total_input_tokens(rollout) in (sum(sent), sum(sent[:-1])), (cx.total_input_tokens(rollout), sent)

    seen = sc.resume(rig, session)
    second = sc.delegate_completed(rig, session, "Say hello again.")
    assert rig.status(session)["conversation_id"] == conversation
    # Every request after the resume showed the model the first brief: the same conversation.
    turns = [r for r in rig.model.snapshot()[seen:] if r.api == "responses" and r.reply != "side"]
    assert turns, "the scripted model got no request after the resume"
    assert all(any(first.tag in t for t in responses_texts(r.body)) for r in turns)
    assert (cx.user_turns_holding(rollout, first.tag), cx.user_turns_holding(rollout, second.tag)) == (1, 1)


def test_no_trust_in_a_fresh_git_folder_fails_the_create_clearly_and_sends_nothing(rig: Rig) -> None:
    cwd = sc.git_folder(rig.ws.root / "untrusted-repo")
    seen = len(rig.model.snapshot())
    sc.refused_without_trust(rig, "cx-untrusted", cwd)
    assert rig.model.snapshot()[seen:] == []  # nothing reached the model
    assert "untrusted-repo" not in (codex_home(rig) / "config.toml").read_text()


def test_a_command_outside_the_allow_rules_leaves_the_prompt_and_the_job_ends_with_a_reason(rig: Rig) -> None:
    session = "cx-ask"
    rig.create(session, cwd=sc.git_folder(rig.ws.root / "ask-repo"))
    outside = rig.home.parent / f"outside-{uuid.uuid4().hex[:8]}"
    text = f"Touch a file outside the project. {{tag}}\nRUN-ESCALATED: touch {outside}"
    d = sc.delegate(rig, session, text, timeout=25, heartbeat=2)
    pane, screen = sc.left_waiting(rig, session, d)  # it got as far as reporting, then waited
    assert cx.APPROVAL_TEXT in screen and str(outside) in screen, rig.shown(pane)
    assert not outside.exists()


def test_a_job_longer_than_k_heartbeats_completes_although_the_sandbox_kills_the_heartbeater(rig: Rig) -> None:
    """10 s of work (more than K x N = 8 s) completes on heartbeats. Codex's sandbox (`--permissions
    report`) kills what `started --heartbeat 2` leaves running: where the agent's own process starts the
    heartbeater (no node), the wrapper starts it again; served by the node, the heartbeater is the node's
    child, outside the sandbox, and beats on (tests/e2e/test_codex_sandbox_heartbeat.py has both)."""
    session = "cx-long"
    rig.create(session, cwd=sc.git_folder(rig.ws.root / "long-repo"))
    d = sc.delegate_completed(rig, session, "Work for ten seconds. {tag}\nRUN: sleep 10", timeout=120, heartbeat=2)
    assert "sleep 10" in d.commands(rig), d.commands(rig)
    lines = rig.mam_json("job", "log", d.record["id"])
    beats = [x for x in lines if (x.get("input") or {}).get("type") == "heartbeat"]
    assert len(beats) >= 3, lines  # 10 s at N = 2: a heartbeater beat through the work (restarted or never killed)


def test_a_fork_holds_the_sources_messages_under_a_new_id_and_the_source_is_untouched(rig: Rig) -> None:
    """`mam session fork` on a running Codex session: `codex fork SRC` (0.171.0). The fork's own rollout
    (in Codex's store) holds the source's brief under a new id; the source keeps running and its
    rollout gains nothing; a job delegated to the fork completes there."""
    rig.create("cx-src", cwd=sc.git_folder(rig.ws.root / "fork-repo"))
    first = sc.delegate_completed(rig, "cx-src", "Say hello.")
    src = rig.status("cx-src")
    fork = rig.mam_json("session", "fork", "cx-src", "--session", "cx-fork")
    assert fork["forked_from"] == "cx-src" and fork["agent"] == "codex" and fork["cwd"] == src["cwd"], fork
    second = sc.delegate_completed(rig, "cx-fork", "Say hello again.")
    # Every request of the fork's turn showed the model the source's brief: the conversation was carried over.
    turns = [r for r in rig.model.snapshot()[second.model_from :] if r.api == "responses" and r.reply != "side"]
    assert turns and all(any(first.tag in t for t in responses_texts(r.body)) for r in turns)
    after = rig.status("cx-src")  # the source ran on, in its own pane, all along
    assert after["status"] == "running" and after["pane_id"] == src["pane_id"] and rig.pane_alive(src["pane_id"])

    source_id = sc.stop_keeping_conversation(rig, "cx-src")
    fork_id = sc.stop_keeping_conversation(rig, "cx-fork")
    assert fork_id != source_id and fork["conversation_id"] in (None, fork_id), (fork, fork_id, source_id)
    fork_rollout, src_rollout = cx.rollout_of(codex_home(rig), fork_id), cx.rollout_of(codex_home(rig), source_id)
    assert fork_rollout is not None and src_rollout is not None, cx.rollouts(codex_home(rig))
    # Codex 0.171 keeps a fork's history by reference: the fork's rollout names the source's and how
    # much of it comes first; read that way, the fork's conversation holds the source's brief, then its own.
    meta = cx.records(fork_rollout)[0]["payload"]
    assert meta["id"] == fork_id and meta["forked_from_id"] == source_id, meta.get("forked_from_id")
    fork_history = cx.history(codex_home(rig), fork_id)
    assert (cx.turns_holding(fork_history, first.tag), cx.turns_holding(fork_history, second.tag)) == (1, 1)
    assert (cx.user_turns_holding(src_rollout, first.tag), cx.user_turns_holding(src_rollout, second.tag)) == (1, 0)


def test_a_turn_ended_without_a_report_is_reminded_then_ends_the_job(rig: Rig) -> None:
    """codex's `notify` program (mam's hook) tells each turn's end: a model that runs `started` and ends its
    turn (and answers the reminder with a text) gets MAM_REMINDERS reminders typed into the composer once it
    shows its placeholder, then the job ends `ended_without_report`, exit 1."""
    session = "cx-forget"
    sc.reminded_then_ended_without_report(
        rig, session, turn_end="notify", source="hook", timeout=120, start_deadline=60
    )
