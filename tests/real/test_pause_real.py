"""`mam job pause` and `mam job resume` (mam/jobs/pause.py) with the real Claude Code 2.1.332 and Codex 0.171.0,
driven by the scripted model servers, each told to hold back its reply to the request that follows the footer's
`started` (`hold_reply(after_started)`): when the test pauses, the CLI's turn is genuinely in progress, waiting on
its model.

- quick: the CLI's interrupt keys cancel that pending request (the server sees it given up, never answered); the
  agent lives on (session `running`, pane alive);
- hard: the same, then the agent is stopped (session `stopped`, pane gone, conversation id kept);
- either way nothing is typed while paused: watched past the job's liveness window (K x N, `--heartbeat 2`) and
  its start deadline, the job stays `paused`, the model gets no new main-loop request and the CLI's transcript
  no new prompt; `mam job resume` types one resume brief (a hard pause: into the agent relaunched with its
  conversation, so the model's later request holds the earlier brief), and the `mam job delegate` that kept
  following the job exits 0 with it `completed`; the brief itself is in the transcript once, the resume brief
  once;
- safe (Claude): the held reply is let go while paused; Claude finishes its turn, its `completed` ends the job
  (exit 0), and mam typed nothing after the pause.
"""

from __future__ import annotations

import json
import os
import subprocess
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from mam.jobs.brief import RESUMED
from mam.util.poll import wait_for
from tests.helpers import brokers
from tests.helpers.mamcli import MAM
from tests.real import _codex_home as cx
from tests.real import _scenario as sc
from tests.real import anthropic_server as anth
from tests.real import openai_server as oai
from tests.real._http import Hold
from tests.real.conftest import Rig, claude_prompts, claude_transcript, missing_reason

pytestmark = pytest.mark.timeout(420)

# What mam types into a pane, by the audit line it writes for it.
TYPED = {"injected", "resume_injected", "reminded", "nudge"}
# What Claude 2.1.332 itself adds to its transcript as a user entry when a turn is interrupted: not typed.
CLAUDE_INTERRUPTED = "[Request interrupted by user"
DELEGATE = ["--timeout", "300", "--start-deadline", "30", "--heartbeat", "2"]


@dataclass
class Cli:
    """What the scenarios read of one CLI: the model's main-loop requests, the prompts in its own transcript."""

    rig: Rig
    main_requests: Callable[[], list[Any]]
    prompts: Callable[[str], list[str]]  # the prompts of the conversation holding this tag, in order
    user_texts: Callable[[Any], list[str]]  # the user turns a request showed the model


# -- Claude -----------------------------------------------------------------------------------------
def claude_cli(rig: Rig) -> Cli:
    def prompts(_tag: str) -> list[str]:
        session = rig.status(rig.sessions[-1])
        found = claude_prompts(claude_transcript(rig.home, session["conversation_id"]))
        return [p for p in found if not p.startswith(CLAUDE_INTERRUPTED)]

    def user_texts(request: anth.Request) -> list[str]:
        return [anth.text_of(m.get("content")) for m in anth.conversation(request.body) if m.get("role") == "user"]

    return Cli(rig, rig.model.main_requests, prompts, user_texts)


# -- Codex ------------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def codex_rig(tmp_path_factory: pytest.TempPathFactory, real_broker: brokers.RunningBroker) -> Iterator[Rig]:
    reason = missing_reason("codex")
    if reason:
        pytest.skip(reason)
    with sc.module_rig(
        "codex",
        tmp_path_factory,
        real_broker,
        oai.ScriptedModel,
        env=lambda root, model: {"CODEX_HOME": str(root / "home" / ".codex"), cx.KEY_VAR: "dummy-key-for-tests"},
    ) as r:
        cx.write_config(r.home / ".codex", base_url=r.model.base_url)
        yield r


def codex_cli(rig: Rig) -> Cli:
    def main_requests() -> list[oai.Recorded]:
        return [r for r in rig.model.snapshot() if r.api == "responses" and r.reply != "side"]

    def prompts(tag: str) -> list[str]:
        home = rig.home / ".codex"
        holding = [p for p in cx.rollouts(home) if cx.user_turns_holding(p, tag)]
        assert len(holding) == 1, f"{len(holding)} rollouts hold {tag}: {cx.rollouts(home)}"
        return [t for t in codex_user_messages(holding[0]) if not oai._is_context(t)]

    def user_texts(request: oai.Recorded) -> list[str]:
        return oai.responses_texts(request.body)

    return Cli(rig, main_requests, prompts, user_texts)


def codex_user_messages(rollout: Path) -> list[str]:
    texts = []
    for rec in cx.records(rollout):
        p = rec.get("payload") or {}
        if rec.get("type") == "response_item" and p.get("type") == "message" and p.get("role") == "user":
            texts.append("\n".join(str(c.get("text", "")) for c in p.get("content") or [] if isinstance(c, dict)))
    return texts


# -- the steps --------------------------------------------------------------------------------------
def spawn_delegate(rig: Rig, session: str, brief: str, job_id: str) -> subprocess.Popen[str]:
    """`mam job delegate ... --json` as a background process (it follows the job through the pause)."""
    args = ["job", "delegate", "--target", f"tmux:{session}", "--brief", brief, "--job-id", job_id, *DELEGATE]
    return subprocess.Popen(
        [MAM, *args, "--json"], env={**os.environ, **rig.env}, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )


def job_status(rig: Rig, job_id: str) -> dict[str, Any]:
    proc = rig.mam("job", "status", job_id, "--json")
    return json.loads(proc.stdout) if proc.returncode == 0 else {}


def audit(rig: Rig, job_id: str) -> list[dict[str, Any]]:
    return list(rig.mam_json("job", "log", job_id))


def input_index(lines: list[dict[str, Any]], name: str) -> int:
    return next(i for i, line in enumerate(lines) if (line.get("input") or {}).get("input") == name)


def typed_between(lines: list[dict[str, Any]], start: int, end: int) -> list[str]:
    return [str(line["kind"]) for line in lines[start:end] if line.get("kind") in TYPED]


def shown(rig: Rig, session: str, job_id: str) -> str:
    row = rig.status(session)
    pane = rig.shown(row["pane_id"]) if row.get("pane_id") else "(no pane)"
    kinds = [str(line.get("kind")) for line in audit(rig, job_id)]
    return f"job: {job_status(rig, job_id)}\naudit: {kinds}\nsession: {row.get('status')}\npane:\n{pane}"


def finish(proc: subprocess.Popen[str], timeout: float = 150) -> tuple[int, dict[str, Any], str]:
    try:
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        out, err = proc.communicate()
    record = json.loads(out) if out.strip().startswith("{") else {}
    return proc.returncode, record, err


def held_while_running(rig: Rig, session: str, job_id: str, hold: Hold) -> None:
    """Wait until the job is `running` (its `started` was accepted) and the model holds the next reply."""

    def there() -> bool:
        return hold.reached.is_set() and job_status(rig, job_id).get("state") == "running"

    wait_for(
        there, timeout=120, interval=0.2, message=lambda: f"never running and held:\n{shown(rig, session, job_id)}"
    )


def watch_nothing_typed(cli: Cli, session: str, job_id: str, tag: str) -> None:
    """Past the job's liveness window (K x N after its last event) and its start deadline's share, by a margin:
    the job stays `paused`, the model gets no new main-loop request, the transcript no new prompt."""
    rig = cli.rig
    job = job_status(rig, job_id)
    requests, prompts = len(cli.main_requests()), cli.prompts(tag)
    last = (job.get("last_event_ms") or job.get("delivered_ms") or 0) / 1000
    until = last + max(job["heartbeat_ms"] * job["heartbeat_k"], job["start_deadline_ms"] / 4) / 1000 + 3.0

    def past() -> bool:
        assert job_status(rig, job_id)["state"] == "paused", shown(rig, session, job_id)
        assert len(cli.main_requests()) == requests, "the model got a main-loop request while the job was paused"
        return time.time() > until

    wait_for(past, timeout=until - time.time() + 30, interval=0.5)
    assert cli.prompts(tag) == prompts, "the CLI's transcript gained a prompt while the job was paused"


def pause_hold_resume(cli: Cli, session: str, mode: str) -> None:
    """The quick and hard scenario (see the module's docstring)."""
    rig = cli.rig
    before = rig.status(session)
    tag = f"BRIEF-{uuid.uuid4().hex[:12]}"
    brief = f"Check the spelling of README.md and report back. {tag}"
    job_id = f"job-pause{mode}{uuid.uuid4().hex[:6]}"
    hold = rig.model.hold_reply(anth.after_started if rig.name == "claude" else oai.after_started)
    proc = spawn_delegate(rig, session, brief, job_id)
    try:
        held_while_running(rig, session, job_id, hold)
        paused = rig.mam_json("job", "pause", job_id, "--mode", mode, "--by", "tester")
        assert paused["state"] == "paused" and paused["paused"]["mode"] == mode, paused
        # The pending request was given up by the CLI (the interrupt keys, or the agent's exit): never answered.
        wait_for(lambda: hold.outcome == "abandoned", timeout=30, message=lambda: shown(rig, session, job_id))
        row = rig.status(session)
        if mode == "quick":
            assert row["status"] == "running" and rig.pane_alive(before["pane_id"]), shown(rig, session, job_id)
        else:
            assert row["status"] == "stopped" and not row["pane_id"], row
            assert not rig.pane_alive(before["pane_id"])
            if before["conversation_id"]:
                assert row["conversation_id"] == before["conversation_id"], (before, row)
            assert row["conversation_id"], row
        watch_nothing_typed(cli, session, job_id, tag)
        assert proc.poll() is None, "the delegate stopped following the paused job"
        seen = len(cli.main_requests())
        resumed = rig.mam_json("job", "resume", job_id, "--by", "tester")
        assert resumed["paused"] is None and resumed["nonce"] != paused["nonce"], resumed
        rc, record, err = finish(proc)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    assert rc == 0 and record.get("id") == job_id and record.get("state") == "completed", (
        f"delegate exited {rc}: {record or err}\n{shown(rig, session, job_id)}"
    )
    after = rig.status(session)
    assert after["status"] == "running", after
    if mode == "hard":
        assert after["conversation_id"] == row["conversation_id"], (row, after)
        # Relaunched (a new process in a new pane: tmux may hand out the same pane id again), its conversation kept.
        assert rig.pane_alive(after["pane_id"]) and after["pane_pid"] != before["pane_pid"], (before, after)
    # Every request after the resume showed the model the brief: the same conversation, carried on.
    later = cli.main_requests()[seen:]
    assert later and all(any(tag in t for t in cli.user_texts(r)) for r in later)
    prompts = cli.prompts(tag)
    assert sum(tag in p for p in prompts) == 1, prompts  # the brief itself, typed once
    assert sum(f"mam job {job_id} {RESUMED}" in p for p in prompts) == 1, prompts
    lines = audit(rig, job_id)
    kinds = [str(line.get("kind")) for line in lines]
    assert kinds.count("injected") == 1 and kinds.count("resume_injected") == 1, kinds
    assert "interrupted" in kinds and ("agent_stopped" in kinds) == (mode == "hard"), kinds
    assert typed_between(lines, input_index(lines, "pause"), input_index(lines, "resume")) == []
    events = sc.event_types(rig, job_id)
    assert events.count("started") == 2 and events[-1] == "completed", events  # started anew after the resume


# -- the tests --------------------------------------------------------------------------------------
@pytest.mark.parametrize("mode", ["quick", "hard"])
def test_claude_quick_and_hard_pauses_hold_and_resume_completes_the_same_job(claude_rig: Rig, mode: str) -> None:
    claude_rig.create(f"cl-{mode}")
    pause_hold_resume(claude_cli(claude_rig), f"cl-{mode}", mode)


def test_claude_safe_pause_lets_the_turn_finish_and_its_completed_ends_the_job(claude_rig: Rig) -> None:
    rig = claude_rig
    session = "cl-safe"
    before = rig.create(session)
    cli = claude_cli(rig)
    tag = f"BRIEF-{uuid.uuid4().hex[:12]}"
    job_id = f"job-pausesafe{uuid.uuid4().hex[:6]}"
    hold = rig.model.hold_reply(anth.after_started)
    proc = spawn_delegate(rig, session, f"Check the spelling of README.md and report back. {tag}", job_id)
    try:
        held_while_running(rig, session, job_id, hold)
        paused = rig.mam_json("job", "pause", job_id, "--mode", "safe", "--by", "tester")
        assert paused["state"] == "paused" and paused["paused"]["mode"] == "safe", paused
        assert hold.outcome == "" and proc.poll() is None  # nothing pressed: the request is still pending
        hold.release()
        rc, record, err = finish(proc)
    finally:
        hold.release()
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    assert rc == 0 and record.get("id") == job_id and record.get("state") == "completed", (
        f"delegate exited {rc}: {record or err}\n{shown(rig, session, job_id)}"
    )
    assert hold.outcome == "released"
    row = rig.status(session)
    assert row["status"] == "running" and row["pane_id"] == before["pane_id"] and rig.pane_alive(before["pane_id"])
    lines = audit(rig, job_id)
    kinds = [str(line.get("kind")) for line in lines]
    assert typed_between(lines, input_index(lines, "pause"), len(lines)) == [], kinds
    assert "interrupted" not in kinds and "resume_injected" not in kinds, kinds
    assert sc.event_types(rig, job_id)[-1] == "completed"
    prompts = cli.prompts(tag)
    assert [tag in p for p in prompts] == [True], prompts  # the brief, once, and nothing else typed


@pytest.mark.parametrize("mode", ["quick", "hard"])
def test_codex_quick_and_hard_pauses_hold_and_resume_completes_the_same_job(codex_rig: Rig, mode: str) -> None:
    session = f"cx-{mode}"
    codex_rig.create(session, cwd=sc.git_folder(codex_rig.ws.root / f"pause-{mode}"))
    try:
        pause_hold_resume(codex_cli(codex_rig), session, mode)
    finally:
        codex_rig.model.hold = None


def test_claude_cancel_interrupts_its_turn_and_the_next_job_completes(claude_rig: Rig) -> None:
    """`mam job cancel` (issue 40): Claude's pending request is given up (its interrupt keys), the agent lives
    on, and the session's next job is typed and completes."""
    rig = claude_rig
    session = "cl-cancel"
    before = rig.create(session)
    job_id = f"job-cancel{uuid.uuid4().hex[:6]}"
    hold = rig.model.hold_reply(anth.after_started)
    proc = spawn_delegate(rig, session, f"Check the spelling of README.md. BRIEF-{uuid.uuid4().hex[:12]}", job_id)
    nxt: subprocess.Popen[str] | None = None
    try:
        held_while_running(rig, session, job_id, hold)
        view = rig.mam_json("job", "cancel", job_id)
        assert view["state"] == "cancelled" and view["reason"] == "cancelled_by_user", view
        wait_for(lambda: hold.outcome == "abandoned", timeout=30, message=lambda: shown(rig, session, job_id))
        rc, _record, err = finish(proc)
        assert rc == 5, err
        next_id = f"job-next{uuid.uuid4().hex[:6]}"
        nxt = spawn_delegate(
            rig, session, f"Check the spelling of the notes file. BRIEF-{uuid.uuid4().hex[:12]}", next_id
        )
        rc, record, err = finish(nxt)
    finally:
        hold.release()
        for p in (proc, nxt):
            if p is not None and p.poll() is None:
                p.kill()
                p.communicate()
    assert rc == 0 and record.get("state") == "completed", f"{rc}: {record or err}\n{shown(rig, session, next_id)}"
    row = rig.status(session)
    assert row["status"] == "running" and row["pane_id"] == before["pane_id"] and rig.pane_alive(before["pane_id"])
    assert "interrupted" in [str(line.get("kind")) for line in audit(rig, job_id)]
