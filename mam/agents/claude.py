"""Claude Code (`claude`): mam picks the session UUID and passes it with --session-id.

Transcripts: `${CLAUDE_CONFIG_DIR:-~/.claude}/projects/<cwd slug>/<uuid>.jsonl`, next to an
optional `<uuid>/` folder (subagent and tool-result files); per-session `tasks/<uuid>/`,
`session-env/<uuid>/`, `file-history/<uuid>/` and `todos/<uuid>-agent-*.json` beside them.
See docs/agents.md.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from mam.agents import convo, trust
from mam.agents.base import AgentAdapter, LaunchContext, PermissionPrompt, SessionOptions
from mam.agents.hooks import claude_settings


class ClaudeAdapter(AgentAdapter):
    name = "claude"
    command = "claude"
    verified_version = "2.1.332"
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

    prompt_version = "2.1.332"  # tests/agents/screens/claude-2.1.332/permission-prompt.txt

    def permission_prompt(self, screen: str) -> PermissionPrompt | None:
        """2.1.332's prompt for a shell command, as captured: a full-width rule, " Bash command", a
        description, the command between two dashed rules (each line after a "│ " gutter, or none), a
        note, "Do you want to proceed?", the
        options (the selected one marked ❯), then "Esc to cancel", in the last `dialog_lines`. A
        banner naming another version anywhere on `screen` refuses it."""
        every = screen.rstrip().splitlines()
        banner = [m.group(1) for line in every if (m := _BANNER.search(line))]
        lines = [line.rstrip() for line in every[-self.dialog_lines :]]
        if banner and banner[-1] != self.prompt_version:
            return None
        ask = next((i for i in range(len(lines) - 1, -1, -1) if lines[i].strip() == "Do you want to proceed?"), None)
        if ask is None:
            return None
        options: list[str] = []
        selected, at = -1, ask + 1
        while at < len(lines) and (m := _OPTION.match(lines[at])):
            if m.group(1):
                selected = len(options)
            options.append(m.group(2).strip())
            at += 1
        footer = [line.strip() for line in lines[at:] if line.strip()]
        if selected < 0 or len(footer) != 1 or not footer[0].startswith("Esc to cancel"):
            return None
        dashed = [i for i in range(ask) if _DASHED.match(lines[i])]
        rules = [i for i in range(ask) if _FULL_RULE.match(lines[i])]
        if len(dashed) < 2 or not rules or not (rules[-1] < dashed[-2] < dashed[-1]):
            return None
        if lines[rules[-1] + 1].strip() != "Bash command":
            return None
        shown = [line[1:] if line.startswith(" ") else line for line in lines[dashed[-2] + 1 : dashed[-1]]]
        if shown and all(line.startswith("│ ") for line in shown):
            shown = [line[2:] for line in shown]  # the gutter some commands get (seen on a `python3 -c '...'`)
        command = "\n".join(shown)
        allow = [i for i, o in enumerate(options) if o == "Yes"]
        deny = [i for i, o in enumerate(options) if o == "No" or o.startswith("No,")]
        if len(allow) != 1 or len(deny) != 1:
            return None
        return PermissionPrompt(f"Bash({command})", tuple(options), selected, allow[0], deny[0])

    def report_options(self, ctx: LaunchContext) -> SessionOptions:
        """One `Bash(<command>:*)` allow rule per allowed command (`--allowedTools` takes several)."""
        return SessionOptions(args=("--allowedTools", *(f"Bash({c}:*)" for c in ctx.allowed_commands)))

    def hook_options(self, ctx: LaunchContext) -> SessionOptions:
        """`--settings .mam/sessions/<name>/claude-settings.json`: mam's hooks (docs/agents.md, Lifecycle hooks)."""
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


_BANNER = re.compile(r"Claude Code v(\d+\.\d+\.\d+)")
_OPTION = re.compile(r"^ (❯)? +(?:\d+\. )?(\S.*)$")
_DASHED = re.compile(r"^╌{8,}$")
_FULL_RULE = re.compile(r"^─{8,}$")

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
