"""The lifecycle hooks of the fake `claude` and `codex`, called as the real programs call them.

claude (2.1.332): the hooks of every `--settings FILE` (`{"hooks": {"Event": [{"matcher", "hooks":
[{"type": "command", "command", "timeout"}]}]}}`), each run through `sh -c` with the event's JSON
on stdin (session_id, transcript_path, cwd, hook_event_name, and the event's own fields), waited
for up to its timeout (the real one waits too: a hook that hangs holds the agent up to there).
codex (0.171): the `-c notify=[...]` program, started with the turn's JSON as its last argument
when a turn completes (not waited for).

Standard library only.
"""

from __future__ import annotations

import json
import os
import subprocess
import threading
from collections.abc import Mapping
from typing import Any

DEFAULT_TIMEOUT_S = 60.0


class Hooks:
    def __init__(self, name: str, argv: list[str], cwd: str) -> None:
        self.name, self.cwd = name, cwd
        self.claude: dict[str, list[dict[str, Any]]] = {}
        self.notify: list[str] = []
        self.session_id, self.transcript = "", ""
        for i, arg in enumerate(argv[:-1]):
            value = argv[i + 1]
            if name == "claude" and arg == "--settings" and not value.lstrip().startswith("{"):
                try:
                    with open(value, encoding="utf-8") as f:
                        hooks = json.load(f).get("hooks") or {}
                except (OSError, ValueError):
                    hooks = {}
                for event, entries in hooks.items():
                    self.claude.setdefault(event, []).extend(entries)
            if name == "codex" and arg in ("-c", "--config") and value.startswith("notify="):
                self.notify = json.loads(value[len("notify=") :])

    def fire(self, event: str, **fields: Any) -> None:
        """claude: run the event's hooks one after the other, waiting for each (up to its timeout)."""
        payload = {
            "session_id": self.session_id,
            "transcript_path": self.transcript,
            "cwd": self.cwd,
            "hook_event_name": event,
            **fields,
        }
        for entry in self.claude.get(event, []):
            for hook in entry.get("hooks", []):
                if hook.get("type") == "command":
                    self._run(hook["command"], payload, float(hook.get("timeout") or DEFAULT_TIMEOUT_S))

    def _run(self, command: str, payload: Mapping[str, Any], timeout: float) -> None:
        try:
            proc = subprocess.Popen(
                ["sh", "-c", command],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=subprocess.DEVNULL,
                start_new_session=True,
            )
            proc.communicate(json.dumps(payload).encode(), timeout=timeout)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.communicate()
        except OSError:
            pass

    def turn_complete(self, thread: str, text: str, reply: str) -> None:
        """codex: the notify program, started (not waited for) with the turn's JSON as last argument."""
        if not self.notify:
            return
        payload = {
            "type": "agent-turn-complete",
            "thread-id": thread,
            "turn-id": os.urandom(8).hex(),
            "cwd": self.cwd,
            "client": "codex-tui",
            "input-messages": [text],
            "last-assistant-message": reply,
        }
        try:
            proc = subprocess.Popen(
                [*self.notify, json.dumps(payload)],
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
            )
            threading.Thread(target=proc.wait, daemon=True).start()
        except OSError:
            pass
