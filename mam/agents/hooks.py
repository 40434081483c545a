"""Per-session settings for a CLI's lifecycle hooks (they call `mam hook`, mam.hooks), written into
`.mam/sessions/<name>/` (never the user's own files).

Each writer returns the launch options that make its CLI load them for this launch only:
Claude reads a `--settings` file, codex takes `-c notify=[...]`. The Gemini CLI has hooks too, but
reads them only from the user's or the project's settings or from a system file that must be
root's, and opencode's plugins did not load in a checked launch (docs/agents.md): mam installs
none for them. docs/agents.md ("Lifecycle hooks") says what each one sends.
"""

from __future__ import annotations

import json
import shlex
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from mam.agents import convo, trust
from mam.agents.base import LaunchContext
from mam.util.proc import module_argv

# Claude Code's hook events mam listens to (all carry session_id, transcript_path, hook_event_name).
CLAUDE_EVENTS = (
    "SessionStart",
    "UserPromptSubmit",
    "PreToolUse",
    "PermissionRequest",
    "PostToolUse",
    "Notification",
    "Stop",
    "SessionEnd",
)
HOOK_TIMEOUT_S = 10  # what a CLI allows the hook; `mam hook` itself gives up well before (mam.hooks.run.HOOK_BUDGET_S)


def hook_argv(ctx: LaunchContext, agent: str) -> list[str]:
    """`<python> -c RUN_MODULE mam hook AGENT --session NAME --workspace ROOT`: mam's own interpreter,
    so the hook runs whatever PATH the agent's tools see, importing nothing from the agent's folder
    (mam.util.proc.module_argv)."""
    root = ctx.mam_dir.parent if ctx.mam_dir is not None else Path(ctx.cwd)
    return module_argv(sys.executable, "mam", "hook", agent, "--session", ctx.session, "--workspace", str(root))


def _write(ctx: LaunchContext, name: str, text: str) -> Path:
    ctx.state_dir.mkdir(mode=0o700, parents=True, exist_ok=True)
    path = ctx.state_dir / name
    convo.write_private(path, text)
    return path


def claude_settings(ctx: LaunchContext, extra: Mapping[str, Any] | None = None) -> Path:
    """`claude-settings.json`: one command hook per event (matcher "*"), plus `extra` settings."""
    command = shlex.join(hook_argv(ctx, "claude"))
    entry = [{"matcher": "*", "hooks": [{"type": "command", "command": command, "timeout": HOOK_TIMEOUT_S}]}]
    settings: dict[str, Any] = {**(extra or {}), "hooks": {event: entry for event in CLAUDE_EVENTS}}
    return _write(ctx, "claude-settings.json", json.dumps(settings, indent=2))


def toml_array(items: Sequence[str]) -> str:
    return "[" + ",".join(trust.toml_string(i) for i in items) + "]"


def codex_notify(ctx: LaunchContext) -> tuple[str, ...]:
    """`-c notify=[...]`: codex runs that program with the turn's JSON as its last argument."""
    return ("-c", f"notify={toml_array(hook_argv(ctx, 'codex'))}")
