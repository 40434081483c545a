"""What the per-CLI scenarios share: one rig per test module (its HOME, workspace, tmux server and
scripted model server), briefs tagged so each can be counted in a store, readers for a job's
accepted events, and the steps every scenario takes (a job that completes, stop and resume, a
prompt left up, a create refused for trust).
"""

from __future__ import annotations

import json
import os
import subprocess
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from mam.workspace import Workspace
from tests.helpers import brokers
from tests.helpers.jobs import FAST
from tests.helpers.tmux import PrivateTmux, private_tmux
from tests.real.clis import BY_NAME
from tests.real.conftest import CACHE, Rig

FOOTER_KINDS = ["started", "progress", "completed"]


def home_env(home: Path) -> dict[str, str]:
    return {
        "HOME": str(home),
        "XDG_CONFIG_HOME": str(home / ".config"),
        "XDG_DATA_HOME": str(home / ".local/share"),
        "XDG_STATE_HOME": str(home / ".local/state"),
        "XDG_CACHE_HOME": str(home / ".cache"),
    }


def make_rig(
    name: str,
    exe: Path,
    root: Path,
    *,
    tmux: PrivateTmux,
    broker: brokers.RunningBroker,
    model: Any,
    env: dict[str, str],
) -> Rig:
    """A rig whose HOME, workspace and tmux server live under `root` (module-scoped callers)."""
    home, ws = root / "home", root / "ws"
    for sub in ("", ".config", ".local/share", ".local/state", ".cache"):
        (home / sub).mkdir(parents=True, exist_ok=True)
    ws.mkdir(exist_ok=True)
    full = {
        "PATH": os.pathsep.join([str(exe.parent), os.environ.get("PATH", os.defpath)]),
        "TERM": "xterm-256color",
        "LANG": "C.UTF-8",
        "SHELL": "/bin/bash",
        **home_env(home),
        **broker.env(),
        **FAST,
        "MAM_TMUX_SERVER": tmux.name,
        "MAM_WORKSPACE": str(ws),
        **env,
    }
    return Rig(name, exe, home, Workspace(ws), tmux, full, model)


@contextmanager
def module_rig(
    name: str,
    tmp_path_factory: pytest.TempPathFactory,
    broker: brokers.RunningBroker,
    model_class: Callable[..., Any],
    env: Callable[[Path, Any], dict[str, str]] = lambda root, model: {},
) -> Iterator[Rig]:
    """The cached CLI `name` with a scripted model server (its requests logged under the root), a
    private tmux server and `make_rig`'s HOME and workspace; `env(root, model)` adds to the env.
    Afterwards: every session the rig created is stopped, then tmux and the model server."""
    exe = BY_NAME[name].executable(CACHE)
    assert exe is not None
    root = tmp_path_factory.mktemp(f"{name}-real")
    model = model_class(log_path=str(root / "model-requests.jsonl")).start()
    tmux = private_tmux()
    r = make_rig(name, exe, root, tmux=tmux, broker=broker, model=model, env=env(root, model))
    yield r
    r.stop_all()
    tmux.kill()
    model.stop()


def version_output(rig: Rig, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    """`<cli> --version` with the rig's env (the caller checks the pinned version in it)."""
    return subprocess.run(
        [str(rig.exe), "--version"], env=rig.env, capture_output=True, text=True, timeout=timeout, check=False
    )


def git_folder(path: Path) -> Path:
    """A fresh git repository (Codex asks whether to trust a repository it has not seen)."""
    path.mkdir(parents=True, exist_ok=True)
    subprocess.run(["git", "init", "-q", str(path)], check=True)
    return path


@dataclass
class Delegation:
    tag: str
    rc: int
    record: dict[str, Any]
    stderr: str
    model_from: int = 0  # how many requests the model server had answered before this job

    def commands(self, rig: Rig) -> list[str]:
        """The commands the scripted model asked the CLI to run for this job (and later ones)."""
        return [r.command for r in rig.model.snapshot()[self.model_from :] if r.command]


def delegate(
    rig: Rig,
    session: str,
    text: str,
    *,
    timeout: float = 120,
    start_deadline: float = 60,
    heartbeat: float = 30,
    extra_env: dict[str, str] | None = None,
) -> Delegation:
    """Delegate `text` with a unique tag appended (or put where `{tag}` stands)."""
    tag = f"BRIEF-{uuid.uuid4().hex[:12]}"
    brief = text.replace("{tag}", tag) if "{tag}" in text else f"{text} {tag}"
    before = len(rig.model.snapshot())
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
        str(heartbeat),
        "--json",
        timeout=timeout + 60,
        extra_env=extra_env,
    )
    record = json.loads(proc.stdout) if proc.stdout.strip().startswith("{") else {}
    return Delegation(tag, proc.returncode, record, proc.stderr, before)


def event_types(rig: Rig, job_id: str) -> list[str]:
    """The types of the events the job accepted, in order (from its audit log)."""
    lines = rig.mam_json("job", "log", job_id)
    inputs = [line.get("input") or {} for line in lines if line.get("kind") == "input"]
    return [str(i.get("type")) for i in inputs if i.get("input") == "event"]


def audit_kinds(rig: Rig, job_id: str) -> list[str]:
    """The kinds of the job's audit lines, in order (`reminded`, `injected`...)."""
    return [str(line.get("kind")) for line in rig.mam_json("job", "log", job_id)]


def activity_inputs(rig: Rig, job_id: str) -> list[dict[str, Any]]:
    """The bodies of the `activity` events the job accepted, in order (from hooks or the CLI's store)."""
    lines = rig.mam_json("job", "log", job_id)
    inputs = [line.get("input") or {} for line in lines if line.get("kind") == "input"]
    return [dict(i.get("body") or {}) for i in inputs if i.get("input") == "event" and i.get("type") == "activity"]


def explain(rig: Rig, session: str, d: Delegation | None = None) -> str:
    """What a failed scenario shows: the job, the commands the model asked for, the pane."""
    row = rig.status(session)
    shown = rig.shown(row["pane_id"]) if row.get("pane_id") else "(no pane)"
    head = f"delegate exited {d.rc}: {d.record or d.stderr}\n" if d else ""
    ran = d.commands(rig) if d else rig.model.commands_run()
    steps = ""
    if d and d.record.get("id"):
        lines = rig.mam_json("job", "log", d.record["id"])
        steps = ", ".join(str(line.get("kind")) + (f" ({line['note']})" if line.get("note") else "") for line in lines)
    return (
        f"{head}--- session: {row.get('status')} ({row.get('note', '')})\n--- audit: {steps}\n"
        f"--- model asked to run: {ran}\n--- pane:\n{shown}"
    )


def reminded_then_ended_without_report(
    rig: Rig, session: str, *, turn_end: str, source: str, timeout: float, start_deadline: float
) -> None:
    """A model that runs `started` and ends its turn without a report (and answers the reminder with a text):
    the CLI's turn ends (each marked `turn_end` by `turn_end`, read through `source`: hook or store) drive one
    reminder typed, then the job ends `ended_without_report`, exit 1, and the session shows idle."""
    rig.create(session, cwd=git_folder(rig.ws.root / "forget-repo"))
    d = delegate(
        rig,
        session,
        "Look, do not report. {tag}\nNO-REPORT",
        timeout=timeout,
        start_deadline=start_deadline,
        extra_env={"MAM_REMIND_AFTER_S": "2", "MAM_REMINDERS": "1"},
    )
    assert d.rc == 1 and d.record.get("reason") == "ended_without_report", explain(rig, session, d)
    assert audit_kinds(rig, d.record["id"]).count("reminded") == 1
    trail = activity_inputs(rig, d.record["id"])
    assert [a["source"] for a in trail if a.get("turn_end")] == [turn_end, turn_end], trail
    row = rig.status(session)
    assert (row["activity"], row["activity_source"]) == ("idle", source), row


def forked(rig: Rig, src: str, new: str, agent: str, source_id: str) -> dict[str, Any]:
    """`mam session fork SRC --session NEW` (stopped with the rig): its record, checked to name its source and
    agent and to hold a conversation of its own."""
    fork = rig.mam_json("session", "fork", src, "--session", new, "--by", "tester@here")
    rig.sessions.append(new)
    assert fork["forked_from"] == src and fork["agent"] == agent, fork
    assert fork["conversation_id"] and fork["conversation_id"] != source_id, fork
    return fork


def delegate_completed(rig: Rig, session: str, text: str, **options: float) -> Delegation:
    """`delegate`, asserting the job completed with exit 0 (the failure message explains why not)."""
    d = delegate(rig, session, text, **options)
    assert d.rc == 0 and d.record.get("state") == "completed", explain(rig, session, d)
    return d


def assert_footer_events(rig: Rig, d: Delegation) -> None:
    """The job accepted started, progress and completed, in that order."""
    kinds = event_types(rig, d.record["id"])
    assert [k for k in kinds if k in FOOTER_KINDS] == FOOTER_KINDS, kinds


def assert_turn_usage(rig: Rig, d: Delegation, source: str) -> None:
    """The job's usage (from `source`, a CLI that records usage per turn or as running totals: grok,
    hermes) is what the Chat Completions server sent for the job's whole turn, token for token: the
    three tool calls and the closing reply (side queries such as a title are not in the turn)."""
    turn = [r for r in rig.model.snapshot()[d.model_from :] if r.api == "chat" and r.reply != "side"][:4]
    usage = d.record["usage"]
    assert usage["source"] == source and [r.reply for r in turn] == ["tool"] * 3 + ["text"], (usage, turn)
    assert usage["input_tokens"] == sum(r.usage["input_tokens"] for r in turn), (usage, turn)
    assert usage["output_tokens"] == sum(r.usage["output_tokens"] for r in turn), (usage, turn)


def stop_keeping_conversation(rig: Rig, session: str) -> str:
    """`mam session stop`: the session is stopped and knows its conversation id (returned)."""
    rig.mam_json("session", "stop", "--session", session)
    row = rig.status(session)
    assert row["status"] == "stopped" and row["conversation_id"], row
    return str(row["conversation_id"])


def resume(rig: Rig, session: str) -> int:
    """`mam session resume`; returns how many requests the model server had answered by then."""
    rig.mam_json("session", "resume", "--session", session)
    return len(rig.model.snapshot())


def left_waiting(rig: Rig, session: str, d: Delegation) -> tuple[str, str]:
    """A job that reported `started`, then ended with a reason (the CLI waits for a person):
    the session's pane and what it shows."""
    assert d.rc in (1, 2) and d.record.get("reason"), explain(rig, session, d)
    assert "started" in event_types(rig, d.record["id"]), explain(rig, session, d)
    pane = str(rig.status(session)["pane_id"])
    return pane, rig.screen(pane)


def refused_without_trust(rig: Rig, session: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    """`session create --no-trust` in a folder the CLI never trusted fails with one line naming it."""
    proc = rig.mam(
        "session",
        "create",
        "--agent",
        rig.name,
        "--role",
        "developer",
        "--session",
        session,
        "--cwd",
        str(cwd),
        "--no-trust",
    )
    rig.sessions.append(session)  # stopped at the end should it have started after all
    assert proc.returncode != 0, proc.stdout
    assert "trust" in proc.stderr and str(cwd) in proc.stderr, proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1, proc.stderr
    return proc
