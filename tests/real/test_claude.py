"""Claude Code 2.1.332, the real program, driven through mam's own CLI against a scripted model.

The model server (tests/real/anthropic_server.py) answers a brief by asking Claude's own `Bash`
tool to run the footer's commands one by one, exactly as printed. So a job completes only if
mam launched Claude so that `mam event ...` runs without a prompt, with `mam` and the workspace
reachable from Claude's tool shell, and the footer's commands run as printed.
"""

from __future__ import annotations

import json
import os
import subprocess
import uuid
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest

from mam.util.poll import wait_for
from tests.deploy import test_install as deploy
from tests.real._scenario import forked, refused_without_trust
from tests.real.anthropic_server import FooterScript, conversation, footer_commands, text_of
from tests.real.clis import BY_NAME
from tests.real.conftest import (
    Rig,
    claude_prompts,
    claude_transcript,
    claude_usage,
    prompts_holding,
    skip_module_without,
    transcript_entries,
)

skip_module_without("claude")
installed = deploy.installed  # the workspace tests/deploy installs once per run (shared across xdist workers)

# What Claude 2.1.332 shows when a tool call needs a person (auto mode with no server-side check,
# or a plain permission question): either way nothing runs until someone answers.
PROMPT_MARKERS = ("Auto mode can't check actions", "Do you want to proceed?")


def brief_text(tag: str) -> str:
    return f"Check the spelling of README.md and report back. Marker {tag}-{uuid.uuid4().hex[:8]}."


def delegate(
    rig: Rig, session: str, brief: str, *, timeout: float = 120, start_deadline: float = 60, extra: tuple[str, ...] = ()
) -> tuple[int, dict[str, Any], str]:
    proc = rig.mam(
        "job",
        "delegate",
        "--target",
        f"tmux:{session}",
        "--brief",
        brief,
        "--timeout",
        str(timeout),
        "--start-deadline",
        str(start_deadline),
        "--heartbeat",
        "30",
        "--json",
        *extra,
        timeout=timeout + 60,
    )
    record = json.loads(proc.stdout) if proc.stdout.strip().startswith("{") else {}
    return proc.returncode, record, proc.stderr


def event_kinds(rig: Rig, job_id: str) -> list[str]:
    """The types of the events the job accepted, in order (from its audit log)."""
    log = rig.mam_json("job", "log", job_id)
    inputs = [line["input"] for line in log if line.get("kind") == "input" and isinstance(line.get("input"), dict)]
    return [str(i["type"]) for i in inputs if i.get("input") == "event"]


def assert_completed(rig: Rig, rc: int, record: dict[str, Any], stderr: str, pane_id: str) -> None:
    assert rc == 0 and record.get("state") == "completed", (
        f"delegate exited {rc}: {record or stderr}\n--- pane:\n{rig.shown(pane_id)}"
    )


def brief_count_in_requests(rig: Rig, brief: str) -> int:
    """In the last request of the main loop: how many user turns hold the brief."""
    last = rig.model.main_requests()[-1].body
    return sum(brief in text_of(m.get("content")) for m in conversation(last) if m.get("role") == "user")


def test_the_cached_claude_is_the_pinned_version(claude_rig: Rig) -> None:
    out = subprocess.run(
        [str(claude_rig.exe), "--version"],
        env={**os.environ, **claude_rig.env},
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert out.returncode == 0 and out.stdout.startswith(BY_NAME["claude"].version), out


def test_delegate_then_stop_and_resume_the_same_conversation(claude_rig: Rig) -> None:
    """(a) delegate -> started -> progress -> completed -> exit 0, the brief once in Claude's transcript;
    (b) stop -> resume -> Claude reopens the same conversation: the model sees the earlier turns."""
    rig = claude_rig
    row = rig.create("dev-1")
    conversation_id = row["conversation_id"]
    assert conversation_id, row

    first = brief_text("first")
    rc, record, err = delegate(rig, "dev-1", first)
    assert_completed(rig, rc, record, err, row["pane_id"])
    kinds = event_kinds(rig, record["id"])
    assert [k for k in kinds if k in ("started", "progress", "completed")] == ["started", "progress", "completed"], (
        kinds
    )
    # Every footer command the model asked for ran as printed (Claude's tool results carry no usage error).
    asked = footer_commands(text_of(conversation(rig.model.main_requests()[0].body)[-1]["content"]))
    assert len(asked) == 3, asked
    prompts = prompts_holding(rig.home, conversation_id, first)
    assert sum(first in p for p in prompts) == 1, prompts
    assert brief_count_in_requests(rig, first) == 1
    # Claude's transcript keeps the usage the model reported, once per message (what usage totals read).
    # The closing reply may land just after `completed` ended the job: wait for all four (three tool calls, one text).
    transcript = claude_transcript(rig.home, conversation_id)

    def all_four() -> dict[str, dict[str, Any]] | None:
        usage = claude_usage(transcript)
        return usage if len(usage) >= 4 else None

    recorded = wait_for(
        all_four, timeout=30, message=lambda: f"Claude recorded {len(claude_usage(transcript))} model messages, not 4"
    )
    sent = rig.model.usage_sent()
    assert len(recorded) == 4 and set(recorded) <= set(sent), (recorded.keys(), sent.keys())
    for message_id, usage in recorded.items():
        assert (usage["input_tokens"], usage["output_tokens"]) == (
            sent[message_id]["input_tokens"],
            sent[message_id]["output_tokens"],
        )

    stopped = rig.mam_json("session", "stop", "--session", "dev-1")
    assert stopped["status"] in ("stopped", "exited"), stopped
    wait_for(lambda: not rig.pane_alive(row["pane_id"]), timeout=30, message="claude did not exit on stop")
    turns_before = len(conversation(rig.model.main_requests()[-1].body))

    resumed = rig.mam_json("session", "resume", "--session", "dev-1")
    assert resumed["conversation_id"] == conversation_id, resumed
    second = brief_text("second")
    rc, record, err = delegate(rig, "dev-1", second)
    assert_completed(rig, rc, record, err, resumed["pane_id"])
    later = rig.model.main_requests()[-1].body
    texts = [text_of(m.get("content")) for m in conversation(later)]
    assert any(first in t for t in texts) and any(second in t for t in texts), (
        "the resumed conversation lost the first brief"
    )
    assert len(conversation(later)) > turns_before
    prompts = prompts_holding(rig.home, conversation_id, second)
    assert sum(first in p for p in prompts) == 1 and sum(second in p for p in prompts) == 1, prompts


def test_a_command_outside_the_allow_rules_leaves_a_prompt_and_the_job_ends_by_its_deadline(claude_rig: Rig) -> None:
    """(c) the model asks for a command no rule allows: Claude asks a person; mam presses nothing
    on that prompt (the command never runs), the job shows `waiting` naming the tool (from the
    PreToolUse hook and the prompt on screen), and ends at its start deadline, exit 1, saying why."""
    rig = claude_rig
    marker = rig.ws.root / "forbidden.txt"
    command = f"python3 -c 'open({str(marker)!r}, \"w\")'"
    rig.model.reset(FooterScript(before=(command,)))
    row = rig.create("dev-perm")
    job_id = "job-claude-perm"
    with ThreadPoolExecutor(1) as pool:
        run = pool.submit(delegate, rig, "dev-perm", brief_text("perm"), timeout=60, start_deadline=12,
                          extra=("--job-id", job_id))  # fmt: skip

        def waiting() -> dict[str, Any] | None:
            found = rig.mam("job", "status", job_id, "--json")
            view = json.loads(found.stdout) if found.returncode == 0 else {}
            # the screen's `waiting` (the auto-mode question) may come first under load: the hook's names the tool
            return view if (view.get("waiting") or {}).get("tool") else None

        view = wait_for(waiting, timeout=30, message=lambda: f"no waiting shown:\n{rig.shown(row['pane_id'])}")
        rc, record, err = run.result()
    assert view["waiting"]["tool"] == f"Bash({command})", view["waiting"]
    assert rc == 1, (rc, record, err)
    assert record["state"] == "failed" and record["reason"] == "agent_blocked", record
    assert record["detail"] == f"waiting for permission: Bash({command})", record
    # Still asking (an Enter would have taken the question off the screen), and still alive.
    bottom = rig.shown(row["pane_id"], lines=15)
    assert any(m in bottom for m in PROMPT_MARKERS), bottom
    assert rig.status("dev-perm")["permissions"] == "report"
    assert rig.pane_alive(row["pane_id"])
    assert not marker.exists(), "the forbidden command ran: something answered Claude's prompt"


def test_a_fresh_folder_is_trusted_for_that_session_only_and_the_brief_arrives(claude_rig: Rig, tmp_path: Path) -> None:
    """(d) a folder Claude has never seen: its trust dialog ("No, exit" preselected) neither kills
    Claude nor eats the brief, because mam records the session's cwd as trusted first."""
    rig = claude_rig
    fresh = tmp_path / "fresh project"
    fresh.mkdir()
    config = json.loads((rig.home / ".claude.json").read_text())
    assert str(fresh) not in config.get("projects", {})
    row = rig.create("dev-fresh", cwd=fresh)
    projects = json.loads((rig.home / ".claude.json").read_text()).get("projects", {})
    assert projects.get(str(fresh), {}).get("hasTrustDialogAccepted") is True, projects
    assert not any(
        k != str(fresh) and v.get("hasTrustDialogAccepted") for k, v in projects.items() if k != str(rig.ws.root)
    ), projects
    brief = brief_text("fresh")
    rc, record, err = delegate(rig, "dev-fresh", brief)
    assert_completed(rig, rc, record, err, row["pane_id"])
    assert sum(brief in p for p in prompts_holding(rig.home, row["conversation_id"], brief)) == 1


def test_no_trust_fails_the_create_clearly_and_answers_nothing(claude_rig: Rig, tmp_path: Path) -> None:
    """(d) with --no-trust mam leaves the dialog to a person: the create fails naming the folder."""
    rig = claude_rig
    fresh = tmp_path / "untrusted"
    fresh.mkdir()
    refused_without_trust(rig, "dev-untrusted", fresh)
    projects = json.loads((rig.home / ".claude.json").read_text()).get("projects", {})
    assert not projects.get(str(fresh), {}).get("hasTrustDialogAccepted"), projects


# -- through the skill scripts of a workspace made by deploy/install.sh --------------------------------


@pytest.fixture
def installed_workspace(tmp_path: Path, request: pytest.FixtureRequest) -> Path:
    """A copy of the workspace deploy/install.sh made for tests/deploy (one install per run, shared)."""
    done: deploy.Installed = request.getfixturevalue("installed")
    assert done.first["rc"] == 0, f"the shared install failed:\n{done.first['out']}\n{done.first['err']}"
    return deploy.copy_workspace(done.ws, tmp_path / "installed-ws")


@pytest.mark.timeout(480)  # the shared install.sh run (two pip installs) may happen in this test's setup
def test_the_skill_scripts_create_and_delegate_to_a_real_claude(claude_rig: Rig, installed_workspace: Path) -> None:
    """create_session.sh --onboard + delegate_job.sh from an installed workspace, as the README shows them."""
    rig = claude_rig
    ws = installed_workspace
    skills = ws / ".agents" / "skills"
    env = {**os.environ, **{k: v for k, v in rig.env.items() if k not in ("MAM_WORKSPACE",)}}
    env.pop("MAM_WORKSPACE", None)

    def script(skill: str, name: str, *args: str, timeout: float = 180) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            ["bash", str(skills / skill / "scripts" / name), *args],
            env=env,
            cwd=ws,
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
        )

    created = script(
        "multi-agent-mux-create",
        "create_session.sh",
        "--workspace",
        str(ws),
        "--agent",
        "claude",
        "--role",
        "developer",
        "--session",
        "skill-dev",
        "--onboard",
    )
    assert created.returncode == 0, f"{created.stdout}\n{created.stderr}"  # --onboard: the onboarding job completed too
    try:
        brief = brief_text("skills")
        done = script(
            "multi-agent-mux-delegate-job",
            "delegate_job.sh",
            "--target",
            "tmux:skill-dev",
            "--brief",
            brief,
            "--timeout",
            "120",
            "--start-deadline",
            "60",
        )
        assert done.returncode == 0, f"{done.stdout}\n{done.stderr}"
        status = json.loads(script("multi-agent-mux-status", "status.sh", "--json").stdout)
        row = next(r for r in status if r["name"] == "skill-dev")
        assert row["cwd"] == str(ws)
        prompts = prompts_holding(rig.home, row["conversation_id"], brief)
        assert sum(brief in p for p in prompts) == 1 and len(prompts) == 2, prompts  # the onboarding brief, then ours
    finally:
        script("multi-agent-mux-stop", "stop_session.sh", "--session", "skill-dev", timeout=60)


def test_a_fork_holds_the_sources_messages_under_a_new_id_and_the_source_is_untouched(claude_rig: Rig) -> None:
    """`mam session fork` on a running Claude session: `claude --resume SRC --fork-session --session-id NEW`.
    The fork's own transcript (in Claude's store) holds the source's messages under the new id; the
    source keeps running and its transcript gains nothing; a job delegated to the fork completes there."""
    rig = claude_rig
    src = rig.create("dev-src")
    first = brief_text("before-fork")
    rc, record, err = delegate(rig, "dev-src", first)
    assert_completed(rig, rc, record, err, src["pane_id"])
    src_transcript = claude_transcript(rig.home, src["conversation_id"])
    src_prompts = claude_prompts(src_transcript)
    assert sum(first in p for p in src_prompts) == 1, src_prompts

    fork = forked(rig, "dev-src", "dev-fork", "claude", src["conversation_id"])
    assert rig.status("dev-fork")["forked_from"] == "dev-src"

    second = brief_text("in-fork")
    rc, record, err = delegate(rig, "dev-fork", second)
    assert_completed(rig, rc, record, err, fork["pane_id"])
    # The model saw the source's brief in the fork's conversation, and the fork's transcript holds both.
    texts = [text_of(m.get("content")) for m in conversation(rig.model.main_requests()[-1].body)]
    assert any(first in t for t in texts) and any(second in t for t in texts), texts
    fork_transcript = claude_transcript(rig.home, fork["conversation_id"])
    assert fork_transcript != src_transcript
    fork_prompts = claude_prompts(fork_transcript)
    assert sum(first in p for p in fork_prompts) == 1 and sum(second in p for p in fork_prompts) == 1, fork_prompts
    ids = {e.get("sessionId") for e in transcript_entries(fork_transcript) if e.get("type") in ("user", "assistant")}
    assert fork["conversation_id"] in ids, ids
    # The source: still running in its pane, its conversation as it was.
    assert rig.pane_alive(src["pane_id"]) and rig.status("dev-src")["pane_id"] == src["pane_id"]
    assert claude_prompts(src_transcript) == src_prompts
