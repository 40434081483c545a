"""xAI Grok Build (`grok`): mam picks the session UUID and passes it with --session-id.

Sessions: `${GROK_HOME:-~/.grok}/sessions/<url-encoded cwd>/<uuid>/`, a folder per session
(summary.json, chat_history.jsonl, updates.jsonl...). The UUID alone finds it, whatever
the exact encoding of the cwd folder name.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

from mam.agents import convo
from mam.agents.base import AgentAdapter


class GrokAdapter(AgentAdapter):
    name = "grok"
    command = "grok"
    id_at_launch = True
    launch_id_args = ("--session-id", "{id}")
    resume_args = ("--resume", "{id}")
    exit_keys = (("text", "/quit"), ("key", "Enter"))
    env_keys = ("HOME", "GROK_HOME")

    def root(self, env: Mapping[str, str]) -> Path:
        return convo.env_dir(env, "GROK_HOME", convo.home(env) / ".grok")

    def conversation_files(self, conversation_id: str, *, cwd: str, env: Mapping[str, str]) -> list[Path]:
        convo.check_id(self.name, conversation_id)
        return sorted(p for p in (self.root(env) / "sessions").glob(f"*/{conversation_id}") if p.is_dir())


ADAPTER = GrokAdapter()
