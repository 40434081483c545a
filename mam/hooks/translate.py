"""One hook call of one CLI -> an `Activity` (or None: nothing mam uses).

What each CLI sends was measured with the real programs (docs/agents.md, "Lifecycle hooks").
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

MAX_TOOL_TEXT = 200


@dataclass(frozen=True)
class Activity:
    state: str  # working / waiting / idle / ended
    source: str  # the hook's own name (SessionStart, PreToolUse, notify, ...)
    tool: str = ""
    message: str = ""
    turn_end: bool = False  # the agent's turn is over
    conversation_id: str = ""
    transcript_path: str = ""


def tool_text(name: Any, tool_input: Any) -> str:
    """`Bash(rm -rf build)`: the tool and what it was asked to do, on one line."""
    name = str(name or "")
    if not name:
        return ""
    arg = ""
    if isinstance(tool_input, Mapping):
        for key in ("command", "file_path", "path", "url", "pattern", "query", "absolute_path", "filePath"):
            value = tool_input.get(key)
            if isinstance(value, str) and value:
                arg = value
                break
    elif isinstance(tool_input, str):
        arg = tool_input
    arg = " ".join(arg.split())
    if len(arg) > MAX_TOOL_TEXT:
        arg = arg[: MAX_TOOL_TEXT - 1] + "\u2026"
    return f"{name}({arg})" if arg else name


class _Ids:
    """conversation id and transcript path of a hook call, passed on to each Activity made from it."""

    def __init__(self, conversation_id: str = "", transcript_path: str = "") -> None:
        self.conversation_id, self.transcript_path = conversation_id, transcript_path

    def __call__(
        self, state: str, source: str, *, tool: str = "", message: str = "", turn_end: bool = False
    ) -> Activity:
        return Activity(state, source, tool, message, turn_end, self.conversation_id, self.transcript_path)

    @classmethod
    def of(cls, hook: Mapping[str, Any]) -> _Ids:
        return cls(str(hook.get("session_id") or ""), str(hook.get("transcript_path") or ""))


def _text(value: Any) -> str:
    return " ".join(str(value).split())[:400] if value else ""


def claude(hook: Mapping[str, Any]) -> Activity | None:
    """Claude Code's settings hooks: every call carries session_id, transcript_path, hook_event_name."""
    name = str(hook.get("hook_event_name") or "")
    act = _Ids.of(hook)
    tool = tool_text(hook.get("tool_name"), hook.get("tool_input"))
    if name == "SessionStart":
        return act("idle", name)
    if name in ("UserPromptSubmit", "PostToolUse", "PostToolUseFailure"):
        return act("working", name)
    if name == "PreToolUse":
        return act("working", name, tool=tool)
    if name == "PermissionRequest":
        return act("waiting", name, tool=tool)
    if name == "Notification":
        kind = str(hook.get("notification_type") or "")
        if kind in ("permission_prompt", "agent_needs_input", "elicitation_dialog"):
            return act("waiting", name, message=_text(hook.get("message")))
        if kind == "idle_prompt":
            return act("idle", name)
        return None
    if name == "Stop":
        return act("idle", name, turn_end=True)
    if name == "SessionEnd":
        return act("ended", name)
    return None


def codex(hook: Mapping[str, Any]) -> Activity | None:
    """codex's `notify` program: called with one JSON argument when a turn completes."""
    if hook.get("type") != "agent-turn-complete":
        return None
    return _Ids(str(hook.get("thread-id") or ""))("idle", "notify", turn_end=True)


TRANSLATORS: dict[str, Callable[[Mapping[str, Any]], Activity | None]] = {
    "claude": claude,
    "codex": codex,
}


def translate(agent: str, hook: Mapping[str, Any]) -> Activity | None:
    fn = TRANSLATORS.get(agent)
    return fn(hook) if fn is not None else None
