"""Per-session hook settings, written into `.mam/sessions/<name>/` (never the user's own files).

Each writer returns the launch options that make its CLI load them for this launch only:
Claude reads a `--settings` file, codex takes `-c notify=[...]`, opencode loads a
plugin file named in its OPENCODE_CONFIG_CONTENT layer. The Gemini CLI has hooks too, but reads them only from the
user's or the project's settings or from a system file that must be root's (docs/agents.md):
mam installs none there. docs/agents.md ("Lifecycle hooks") says what each one sends.
"""

from __future__ import annotations

import json
import shlex
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from mam.agents.base import LaunchContext

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
HOOK_TIMEOUT_S = 10  # what a CLI allows the hook; `mam hook` itself gives up well before (run.HOOK_BUDGET_S)


def hook_argv(ctx: LaunchContext, agent: str) -> list[str]:
    """`<python> -m mam hook AGENT --session NAME --workspace ROOT`: mam's own interpreter, so the
    hook runs whatever PATH the agent's tools see."""
    root = ctx.mam_dir.parent if ctx.mam_dir is not None else Path(ctx.cwd)
    return [sys.executable, "-m", "mam", "hook", agent, "--session", ctx.session, "--workspace", str(root)]


def _write(ctx: LaunchContext, name: str, text: str) -> Path:
    from mam.agents import convo

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
    from mam.agents import trust

    return "[" + ",".join(trust.toml_string(i) for i in items) + "]"


def codex_notify(ctx: LaunchContext) -> tuple[str, ...]:
    """`-c notify=[...]`: codex runs that program with the turn's JSON as its last argument."""
    return ("-c", f"notify={toml_array(hook_argv(ctx, 'codex'))}")


_OPENCODE_PLUGIN = """// Written by mam for session {session}: forward opencode's events to `mam hook opencode`.
const ARGV = {argv};
const KINDS = new Set([
  "session.idle", "session.status", "permission.updated", "permission.asked", "permission.replied",
]);
const send = (event) =>
  Bun.spawn(ARGV, {{ stdin: new Blob([JSON.stringify(event)]), stdout: "ignore", stderr: "ignore" }});
export const MamHooks = async ({{ $ }}) => ({{
  event: async ({{ event }}) => {{
    if (!KINDS.has(event.type)) return;
    try {{
      await Promise.race([send(event).exited, new Promise((r) => setTimeout(r, {timeout_ms}))]);
    }} catch (e) {{}}
  }},
  "tool.execute.before": async (input, output) => {{
    try {{
      const properties = {{ sessionID: input.sessionID, tool: input.tool, args: output.args }};
      send({{ type: "tool.execute.before", properties }});
    }} catch (e) {{}}
  }},
}});
"""


def opencode_plugin(ctx: LaunchContext) -> Path:
    """`opencode-mam-hooks.js`: a plugin that hands opencode's bus events to `mam hook opencode`."""
    text = _OPENCODE_PLUGIN.format(
        session=ctx.session, argv=json.dumps(hook_argv(ctx, "opencode")), timeout_ms=HOOK_TIMEOUT_S * 1000
    )
    return _write(ctx, "opencode-mam-hooks.js", text)
