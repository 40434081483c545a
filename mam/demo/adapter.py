"""The demo agent's adapter: a real interactive program shipped with mam (no LLM).

It chooses its conversation id at launch like claude, keeps conversations under
<workspace>/.mam/demo-agent/conversations/<id>.json (so it writes nothing in HOME) and exits
on `/exit` + Enter.
"""

from __future__ import annotations

import sys
from collections.abc import Mapping
from pathlib import Path
from typing import ClassVar

from mam.agents.base import AgentAdapter, KeyStep
from mam.demo.agent import conversation_paths
from mam.util.proc import module_argv


class DemoAdapter(AgentAdapter):
    name = "demo"
    command = sys.executable
    id_at_launch = True
    exit_keys: ClassVar[tuple[KeyStep, ...]] = (("key", "C-c"), ("text", "/exit"), ("key", "Enter"))
    paste_placeholders = ("[pasted ",)
    ready_marker = "demo agent ready"
    env_keys = ("HOME", "MAM_WORKSPACE")

    def launch_argv(self, conversation_id: str | None) -> list[str]:
        return module_argv(sys.executable, "mam.agents.demo_agent", "--session-id", conversation_id or "")

    def resume_argv(self, conversation_id: str) -> list[str]:
        return module_argv(sys.executable, "mam.agents.demo_agent", "--resume", conversation_id)

    def conversation_files(self, conversation_id: str, *, cwd: str, env: Mapping[str, str]) -> list[Path]:
        return conversation_paths(env, conversation_id)


ADAPTER = DemoAdapter()
