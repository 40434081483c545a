"""Claude Code (`claude`): mam picks the session UUID and passes it with --session-id.

Transcripts: `${CLAUDE_CONFIG_DIR:-~/.claude}/projects/<cwd slug>/<uuid>.jsonl`, next to an
optional `<uuid>/` folder (subagent and tool-result files); per-session `tasks/<uuid>/`,
`session-env/<uuid>/`, `file-history/<uuid>/` and `todos/<uuid>-agent-*.json` beside them.
See docs/agents.md.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from mam.agents import convo, trust
from mam.agents.base import AgentAdapter, LaunchContext, SessionOptions


class ClaudeAdapter(AgentAdapter):
    name = "claude"
    command = "claude"
    install_hint = "npm install -g @anthropic-ai/claude-code"
    id_at_launch = True
    launch_id_args = ("--session-id", "{id}")
    resume_args = ("--resume", "{id}")
    # Verified with 2.1.332: "--fork-session  When resuming, create a new session ID instead of reusing the
    # original"; --session-id names that new id ("--session-id with --continue or --resume also needs --fork-session").
    fork_mode = "native"
    fork_args = ("--resume", "{id}", "--fork-session", "--session-id", "{new}")
    exit_keys = (("text", "/exit"), ("key", "Enter"))
    env_keys = ("HOME", "CLAUDE_CONFIG_DIR")
    paste_placeholders = ("[Pasted text #",)
    # Launch options (verified with 2.1.332, docs/agents.md): an allow rule for the footer's commands;
    # full also pre-accepts the bypass-mode warning, which would otherwise stop the launch with "No, exit".
    # (The bypass warning's pre-accept goes into the session's settings file with the hooks: hook_options.)
    full_args = ("--dangerously-skip-permissions",)
    trust_markers = ("Yes, I trust this folder", "Is this a project you created or one you trust?")
    # Every Claude dialog (permission prompt, auto-mode check, bypass warning) ends "... Esc to cancel"; the
    # auto-mode nudge (avoided by hook_options, docs/agents.md) and the first-run theme picker do not.
    prompt_markers = (
        "Do you want to proceed?",
        "Enter to stay in auto mode",
        "Yes, I accept",
        "Esc to cancel",
        "Make auto mode your default permission mode?",
        "Choose the text style that looks best with your terminal",
    )

    def report_options(self, ctx: LaunchContext) -> SessionOptions:
        """One `Bash(<command>:*)` allow rule per allowed command (`--allowedTools` takes several)."""
        return SessionOptions(args=("--allowedTools", *(f"Bash({c}:*)" for c in ctx.allowed_commands)))

    def hook_options(self, ctx: LaunchContext) -> SessionOptions:
        """`--settings .mam/sessions/<name>/claude-settings.json`: mam's hooks (docs/agents.md, Lifecycle hooks)."""
        from mam.hooks.config import claude_settings

        extra: dict[str, Any] = {"skipDangerousModePermissionPrompt": True} if ctx.permissions == "full" else {}
        mode = self.user_default_mode(ctx.env)
        if mode is not None and not _project_default_mode(Path(ctx.cwd)):
            # (A project that chooses its own mode is not asked about, and its choice must keep winning.)
            # 2.1.332 asks "Make auto mode your default permission mode?" at launch when only the user's
            # settings choose a default mode other than auto; the same mode in this launch's --settings
            # file keeps the user's choice and is not asked about (docs/agents.md, Dialogs at launch).
            # With `full` the flag's bypass mode still wins over it (checked).
            extra["permissions"] = {"defaultMode": mode}
        return SessionOptions(args=("--settings", str(claude_settings(ctx, extra))))

    def user_default_mode(self, env: Mapping[str, str]) -> str | None:
        """`permissions.defaultMode` of the user's own `${CLAUDE_CONFIG_DIR:-~/.claude}/settings.json`
        (read, never written), or None when it chooses none (or cannot be read)."""
        try:
            settings = json.loads((self.root(env) / "settings.json").read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return None
        permissions = settings.get("permissions") if isinstance(settings, dict) else None
        mode = permissions.get("defaultMode") if isinstance(permissions, dict) else None
        return mode if isinstance(mode, str) and mode in KNOWN_MODES else None  # nothing unknown is copied

    def is_ready(self, screen: str) -> bool:
        """Ready when its input box (a line between two rules) shows and no dialog is in the way."""
        return self.framed_box(screen) is not None and self.dialog(screen) is None

    def input_box(self, screen: str) -> str:
        # The submitted brief stays on screen above the box (with its nonce): only the framed box counts.
        return self.framed_box(screen) or ""

    def trust_folder(self, cwd: str, env: Mapping[str, str]) -> Path | None:
        """`projects.<cwd>.hasTrustDialogAccepted` in `${CLAUDE_CONFIG_DIR:-~}/.claude.json`."""
        return trust.trust_in_json(self.state_file(env), cwd, agent=self.name)

    def state_file(self, env: Mapping[str, str]) -> Path:
        return convo.env_dir(env, "CLAUDE_CONFIG_DIR", convo.home(env)) / ".claude.json"

    def root(self, env: Mapping[str, str]) -> Path:
        return convo.env_dir(env, "CLAUDE_CONFIG_DIR", convo.home(env) / ".claude")

    def transcript(self, conversation_id: str, *, cwd: str, env: Mapping[str, str]) -> Path:
        """The transcript's path: under the cwd's project folder, or wherever that UUID already is
        (claude 2.1.332 resumes a session id from any folder)."""
        convo.check_id(self.name, conversation_id)
        projects = self.root(env) / "projects"
        expected = projects / convo.claude_slug(cwd) / f"{conversation_id}.jsonl"
        if expected.exists():
            return expected
        # Very long cwds get a shortened folder name in some versions: the UUID alone is unique.
        found = sorted(projects.glob(f"*/{conversation_id}.jsonl"))
        return found[0] if found else expected

    def conversation_files(self, conversation_id: str, *, cwd: str, env: Mapping[str, str]) -> list[Path]:
        transcript = self.transcript(conversation_id, cwd=cwd, env=env)
        root = self.root(env)
        extras = [
            transcript.with_suffix(""),
            root / "file-history" / conversation_id,
            root / "tasks" / conversation_id,
            root / "session-env" / conversation_id,
        ]
        return [transcript, *extras, *sorted((root / "todos").glob(f"{conversation_id}-agent-*.json"))]

    def conversation_exists(self, conversation_id: str, *, cwd: str, env: Mapping[str, str]) -> bool:
        return self.transcript(conversation_id, cwd=cwd, env=env).is_file()


ADAPTER = ClaudeAdapter()


# The permission modes Claude Code 2.1.332 knows (its --permission-mode choices); only these are copied.
KNOWN_MODES = frozenset({"default", "manual", "acceptEdits", "plan", "bypassPermissions", "auto", "dontAsk"})


def _project_default_mode(cwd: Path) -> bool:
    """Whether the folder's own `.claude/settings.json` or `settings.local.json` chooses a default mode."""
    for name in ("settings.json", "settings.local.json"):
        try:
            data = json.loads((cwd / ".claude" / name).read_text(encoding="utf-8"))
        except (OSError, ValueError):
            continue
        permissions = data.get("permissions") if isinstance(data, dict) else None
        if isinstance(permissions, dict) and permissions.get("defaultMode"):
            return True
    return False
