"""The demo agent's adapter: a real interactive program shipped with mam (no LLM).

It chooses its conversation id at launch like claude, keeps conversations under
<workspace>/.mam/demo-agent/conversations/<id>.json (so it writes nothing in HOME) and exits
on `/exit` + Enter. It has no fork of its own: `mam session fork` copies the conversation file
under the new id and resumes the copy.
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import ClassVar

from mam.agents.base import AgentAdapter, KeyStep
from mam.demo.agent import PROMPT, conversation_paths, conversations_dir
from mam.errors import AgentError
from mam.util.proc import module_argv


class DemoAdapter(AgentAdapter):
    name = "demo"
    command = sys.executable
    id_at_launch = True
    exit_keys: ClassVar[tuple[KeyStep, ...]] = (("key", "C-c"), ("text", "/exit"), ("key", "Enter"))
    paste_placeholders = ("[pasted ",)
    ready_marker = "demo agent ready"
    env_keys = ("HOME", "MAM_WORKSPACE")
    fork_mode = "copy"

    def input_box(self, screen: str) -> str:
        """The prompt line, the screen's last: `›` and what is typed after it (a paste shows as its
        placeholder); '' when the last line is not the prompt."""
        lines = screen.rstrip("\n").splitlines()
        return lines[-1] if lines and lines[-1].startswith(PROMPT) else ""

    def launch_argv(self, conversation_id: str | None) -> list[str]:
        return module_argv(sys.executable, "mam.agents.demo_agent", "--session-id", conversation_id or "")

    def resume_argv(self, conversation_id: str) -> list[str]:
        return module_argv(sys.executable, "mam.agents.demo_agent", "--resume", conversation_id)

    def conversation_files(self, conversation_id: str, *, cwd: str, env: Mapping[str, str]) -> list[Path]:
        return conversation_paths(env, conversation_id)

    def copy_conversation(self, source_id: str, new_id: str, *, cwd: str, env: Mapping[str, str]) -> list[Path]:
        """A copy of the source's conversation file under the new id (its turns, its id replaced)."""
        source = next((p for p in conversation_paths(env, source_id) if p.is_file()), None)
        if source is None:
            raise AgentError(f"demo: conversation {source_id} not found", conversation_id=source_id)
        data = json.loads(source.read_text())  # the agent replaces its file whole (os.replace): never half-written
        target = conversations_dir(env) / f"{new_id}.json"
        target.parent.mkdir(parents=True, exist_ok=True)
        data.update(id=new_id, forked_from=source_id)
        fd = os.open(target, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)  # never over another's
        with os.fdopen(fd, "w") as f:
            json.dump(data, f)
        return [target]


ADAPTER = DemoAdapter()
