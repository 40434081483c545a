"""Several real CLIs in one HOME, each pointed at its scripted model server, for the tests that run
more than one CLI at once (a loop's creator and reviewer, an MCP client beside mam).

`Models` starts the three scripted servers (Anthropic for claude, the OpenAI-style one for codex,
opencode, grok and hermes, Gemini's for gemini) with one `more` script for all; `wire(name, home,
models)` writes what that CLI needs in `home` (as each per-CLI test module does) and returns the
environment it needs. Every path comes from the caller; the real user's folders are never touched.
"""

from __future__ import annotations

import json
import os
import re
import secrets
from collections.abc import Callable
from pathlib import Path
from typing import Any

from tests.real import _codex_home as cx
from tests.real import _opencode_home as oc
from tests.real.anthropic_server import (
    AnthropicServer,
    Block,
    FooterScript,
    Text,
    ToolUse,
    footer_turn,
    is_main_turn,
    tool_names,
)
from tests.real.clis import BY_NAME
from tests.real.conftest import CACHE, claude_env, claude_home
from tests.real.gemini_server import GeminiModel
from tests.real.openai_server import ScriptedModel, Step, named_tool

GEMINI_SETTINGS = {
    "security": {"auth": {"selectedType": "gemini-api-key"}},
    "general": {"disableAutoUpdate": True, "disableUpdateNag": True},
    "privacy": {"usageStatisticsEnabled": False},
    "telemetry": {"enabled": False},
}


class Models:
    """The three scripted servers, each running `more(user text)`'s steps after the footer's `started`."""

    def __init__(self, more: Callable[[str], list[Step]], log_dir: Path) -> None:
        self.more = more
        self.openai = ScriptedModel(more=more, log_path=str(log_dir / "openai-requests.jsonl"))
        self.gemini = GeminiModel(more=more, log_path=str(log_dir / "gemini-requests.jsonl"))
        self.anthropic = AnthropicServer(self._claude_script)
        self.claude_key = f"sk-ant-api03-{secrets.token_urlsafe(48)}"
        self._deferred: set[str] = set()

    def _claude_script(self, body: dict[str, Any]) -> list[Block]:
        """Claude's model: the footer's `started`, then `more`'s steps (a shell command through Bash, or
        an MCP tool call), then `progress` and `completed`, then a final text."""
        # Claude Code 2.1 defers MCP tools: their names come once, in a system reminder of an early
        # request, and the model may call one by name (`mcp__<server>__<tool>`).
        self._deferred.update(re.findall(r"mcp__\w+", json.dumps(body)))
        if not is_main_turn(body):
            return [Text("Scripted title")]
        found = footer_turn(body, FooterScript.kinds)
        if found is None:
            return [Text("Nothing to run.")]
        commands, done = found
        plan = [Step(commands[0]), *self.more(_last_footer_text(body)), *(Step(c) for c in commands[1:])]
        if done >= len(plan):
            return [Text("Done.")]
        step = plan[done]
        if step.tool:
            name = named_tool([*tool_names(body), *self._deferred], step.tool)
            return [Text(f"Step {done + 1}."), ToolUse(name, dict(step.args))]
        return [
            Text(f"Step {done + 1}."),
            ToolUse("Bash", {"command": step.command, "description": f"step {done + 1}"}),
        ]

    def server_for(self, name: str) -> Any:
        """The scripted server CLI `name` talks to."""
        return {"claude": self.anthropic, "gemini": self.gemini}.get(name, self.openai)

    def __enter__(self) -> Models:
        self.openai.start()
        self.gemini.start()
        self.anthropic.__enter__()
        return self

    def __exit__(self, *exc: object) -> None:
        self.anthropic.__exit__(None, None, None)
        self.gemini.stop()
        self.openai.stop()


def _last_footer_text(body: dict[str, Any]) -> str:
    from tests.real.anthropic_server import conversation, footer_commands, text_of

    for turn in reversed(conversation(body)):
        if turn.get("role") == "user":
            text = text_of(turn.get("content"))
            if footer_commands(text):
                return text
    return ""


def exe(name: str) -> Path:
    found = BY_NAME[name].executable(CACHE)
    assert found is not None, f"{name} is not in {CACHE}"
    return found


def wire(name: str, home: Path, models: Models) -> dict[str, str]:
    """Write what CLI `name` needs under `home` and return the environment it needs (PATH not included)."""
    if name == "claude":
        claude_home(home, models.claude_key)
        env = claude_env(exe("claude"), home, models.anthropic.base_url, models.claude_key)
        env.pop("PATH")
        if os.geteuid() == 0:  # Claude refuses --dangerously-skip-permissions as root outside a sandbox
            env["IS_SANDBOX"] = "1"
        return env
    if name == "codex":
        cx.write_config(home / ".codex", base_url=models.openai.base_url)
        return {"CODEX_HOME": str(home / ".codex"), cx.KEY_VAR: "dummy-key-for-tests"}
    if name == "opencode":
        oc.write_config(home / ".config", base_url=models.openai.base_url)
        return dict(oc.ENV)
    if name == "gemini":
        (home / ".gemini").mkdir(parents=True, exist_ok=True)
        (home / ".gemini" / "settings.json").write_text(json.dumps(GEMINI_SETTINGS), encoding="utf-8")
        return {"GOOGLE_GEMINI_BASE_URL": models.gemini.base_url, "GEMINI_API_KEY": "dummy", "NO_BROWSER": "1"}
    if name == "grok":
        (home / ".grok").mkdir(parents=True, exist_ok=True)
        url = models.openai.base_url
        (home / ".grok" / "config.toml").write_text(
            f'[endpoints]\nxai_api_base_url = "{url}"\nmodels_base_url = "{url}"\n'
            '[models]\ndefault = "scripted-model"\n[features]\ntelemetry = false\n[cli]\nauto_update = false\n',
            encoding="utf-8",
        )
        return {"XAI_API_KEY": "dummy-key-for-tests", "DISABLE_TELEMETRY": "1"}
    if name == "hermes":
        hermes_home = home / ".hermes"
        hermes_home.mkdir(parents=True, exist_ok=True)
        (hermes_home / "config.yaml").write_text(
            "model:\n  default: scripted-model\n  provider: custom\n"
            f"  base_url: {models.openai.base_url}\n  api_key: dummy-key-for-tests\n",
            encoding="utf-8",
        )
        return {"HERMES_HOME": str(hermes_home)}
    raise ValueError(f"no wiring for {name}")


def path_with(names: list[str]) -> str:
    """PATH with each named CLI's folder in front."""
    return os.pathsep.join([*dict.fromkeys(str(exe(n).parent) for n in names), os.environ.get("PATH", os.defpath)])
