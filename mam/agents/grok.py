"""xAI Grok Build (`grok`): mam picks the session UUID and passes it with --session-id.

Sessions: `${GROK_HOME:-~/.grok}/sessions/<url-encoded cwd>/<uuid>/`, a folder per session
(summary.json, chat_history.jsonl, updates.jsonl...). The UUID alone finds it, whatever
the exact encoding of the cwd folder name.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import replace
from datetime import datetime
from pathlib import Path

from mam.agents import convo
from mam.agents.base import AgentAdapter, LaunchContext, Noted, SessionOptions

# What grok 0.2.111 records in a session's events.jsonl (seen with the real program), as activity.
_EVENTS = {
    "turn_started": "working",
    "tool_started": "working",
    "permission_requested": "waiting",
    "permission_resolved": "working",
    "tool_completed": "working",
    "turn_ended": "idle",
}
MAX_READ = 1024 * 1024  # of events.jsonl per look


class GrokAdapter(AgentAdapter):
    name = "grok"
    command = "grok"
    verified_version = "0.2.111"
    install_hint = "pipx install grok-cli-bin"
    id_at_launch = True
    launch_id_args = ("--session-id", "{id}")
    resume_args = ("--resume", "{id}")
    # Verified with 0.2.111 (`grok --help`): "--fork-session  When resuming (`--resume` / `--continue`), create
    # a new session ID instead of reusing the original (optionally set via `--session-id`)".
    fork_mode = "native"
    fork_args = ("--resume", "{id}", "--fork-session", "--session-id", "{new}")
    exit_keys = (("text", "/quit"), ("key", "Enter"))
    env_keys = ("HOME", "GROK_HOME")
    paste_placeholders = ("[Pasted: ",)
    full_args = ("--always-approve",)
    # ... and its login screen when it has no key nor login (verified with 0.2.111: its input box shows
    # under it, and the letters of a paste would choose "Login" (l) or "Quit" (q)).
    prompt_markers = ("Allow once", "Always allow on all sessions", "Login with Grok")

    def report_options(self, ctx: LaunchContext) -> SessionOptions:
        """One `--allow Bash(<command>:*)` per allowed command (its Claude-style rules; `Bash` also names
        run_terminal_command)."""
        return SessionOptions(args=tuple(a for c in ctx.allowed_commands for a in ("--allow", f"Bash({c}:*)")))

    def input_box(self, screen: str) -> str:
        """The last rounded frame (`╭` ... `╰`) on the screen; a paste preview frame sits above it."""
        lines = screen.rstrip("\n").splitlines()
        tops = [i for i, line in enumerate(lines) if line.strip().startswith("\u256d")]
        if not tops:
            return ""
        bottom = next((i for i in range(tops[-1] + 1, len(lines)) if lines[i].strip().startswith("\u2570")), None)
        return "\n".join(lines[tops[-1] + 1 : bottom]) if bottom is not None else ""

    def is_ready(self, screen: str) -> bool:
        return "\u276f" in self.input_box(screen) and self.dialog(screen) is None

    def root(self, env: Mapping[str, str]) -> Path:
        return convo.env_dir(env, "GROK_HOME", convo.home(env) / ".grok")

    def conversation_files(self, conversation_id: str, *, cwd: str, env: Mapping[str, str]) -> list[Path]:
        convo.check_id(self.name, conversation_id)
        return sorted(p for p in (self.root(env) / "sessions").glob(f"*/{conversation_id}") if p.is_dir())

    activity_store = "the session folder's events.jsonl"

    def read_activity(
        self, conversation_id: str, *, cwd: str, env: Mapping[str, str], cursor: dict[str, object]
    ) -> list[Noted] | None:
        """The session folder's `events.jsonl` (grok 0.2.111, one JSON object a line, `ts` ISO 8601 UTC):
        `turn_started`, `tool_started` (`tool_name`), `permission_requested` / `permission_resolved` (one
        pair for every command, resolved at once when an allow rule covers it), `tool_completed`,
        `turn_ended`. Read from the byte after the last whole line read."""
        path = cursor.get("path")
        if not isinstance(path, Path):
            folders = self.conversation_files(conversation_id, cwd=cwd, env=env)
            if not folders:
                return []
            path = cursor["path"] = folders[0] / "events.jsonl"
        offset = cursor.get("offset", 0)
        assert isinstance(offset, int)
        try:
            with path.open("rb") as f:
                f.seek(offset)
                data = f.read(MAX_READ)
        except OSError:
            return []
        whole = data[: data.rfind(b"\n") + 1]
        cursor["offset"] = offset + len(whole)
        out = []
        for line in whole.splitlines():
            n = _noted(line)
            if n is None:
                continue
            if n.source == "turn_started":
                convo.turn_began(cursor, n.at)
            elif n.turn_end:
                n = replace(n, begun=convo.turn_began(cursor))
            out.append(n)
        return out


def _noted(line: bytes) -> Noted | None:
    try:
        record = json.loads(line)
        kind = str(record.get("type") or "")
        at = datetime.fromisoformat(str(record.get("ts"))).timestamp()
    except (ValueError, AttributeError, TypeError):
        return None
    state = _EVENTS.get(kind)
    if state is None:
        return None
    tool = str(record.get("tool_name") or "") if kind != "turn_ended" else ""
    message = "permission requested" if state == "waiting" else ""
    return Noted(at, state, kind, tool=tool, message=message, turn_end=kind == "turn_ended")


ADAPTER = GrokAdapter()
