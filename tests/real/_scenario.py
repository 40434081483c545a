"""What the Codex and opencode scenarios share: one rig per test module (one session reused by
its scenarios, to keep wall time small), briefs tagged so each can be counted in a store, and
readers for a job's accepted events.
"""

from __future__ import annotations

import json
import os
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from mam.workspace import Workspace
from tests.helpers import brokers
from tests.helpers.jobs import FAST
from tests.helpers.tmux import PrivateTmux
from tests.real.conftest import Rig


def home_env(home: Path) -> dict[str, str]:
    return {
        "HOME": str(home), "XDG_CONFIG_HOME": str(home / ".config"), "XDG_DATA_HOME": str(home / ".local/share"),
        "XDG_STATE_HOME": str(home / ".local/state"), "XDG_CACHE_HOME": str(home / ".cache"),
    }


def make_rig(name: str, exe: Path, root: Path, *, tmux: PrivateTmux, broker: brokers.RunningBroker, model: Any,
             env: dict[str, str]) -> Rig:
    """A rig whose HOME, workspace and tmux server live under `root` (module-scoped callers)."""
    home, ws = root / "home", root / "ws"
    for sub in ("", ".config", ".local/share", ".local/state", ".cache"):
        (home / sub).mkdir(parents=True, exist_ok=True)
    ws.mkdir(exist_ok=True)
    full = {
        "PATH": os.pathsep.join([str(exe.parent), os.environ.get("PATH", os.defpath)]),
        "TERM": "xterm-256color", "LANG": "C.UTF-8", "SHELL": "/bin/bash", **home_env(home),
        **broker.env(), **FAST, "MAM_TMUX_SERVER": tmux.name, "MAM_WORKSPACE": str(ws), **env,
    }
    return Rig(name, exe, home, Workspace(ws), tmux, full, model)


def git_folder(path: Path) -> Path:
    """A fresh git repository (Codex asks whether to trust a repository it has not seen)."""
    import subprocess

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
        return [r.command for r in rig.model.snapshot()[self.model_from:] if r.command]


def delegate(rig: Rig, session: str, text: str, *, timeout: float = 120, start_deadline: float = 60, heartbeat: float = 30) -> Delegation:
    """Delegate `text` with a unique tag appended (or put where `{tag}` stands)."""
    tag = f"BRIEF-{uuid.uuid4().hex[:12]}"
    brief = text.replace("{tag}", tag) if "{tag}" in text else f"{text} {tag}"
    before = len(rig.model.snapshot())
    proc = rig.mam("job", "delegate", "--target", f"tmux:{session}", "--brief", brief, "--timeout", str(timeout),
                   "--start-deadline", str(start_deadline), "--heartbeat", str(heartbeat), "--json", timeout=timeout + 60)
    record = json.loads(proc.stdout) if proc.stdout.strip().startswith("{") else {}
    return Delegation(tag, proc.returncode, record, proc.stderr, before)


def event_types(rig: Rig, job_id: str) -> list[str]:
    """The types of the events the job accepted, in order (from its audit log)."""
    lines = rig.mam_json("job", "log", job_id)
    inputs = [line.get("input") or {} for line in lines if line.get("kind") == "input"]
    return [str(i.get("type")) for i in inputs if i.get("input") == "event"]


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
    return (f"{head}--- session: {row.get('status')} ({row.get('note', '')})\n--- audit: {steps}\n"
            f"--- model asked to run: {ran}\n--- pane:\n{shown}")
