"""Google Antigravity CLI (`agy`): the conversation id is agy's own, discovered afterwards.

Under `~/.gemini/antigravity-cli/` (ANTIGRAVITY_CLI_HOME, if set, replaces that folder):
`conversations/<uuid>.db` is one SQLite file per conversation, `brain/<uuid>/` its
artifacts, and `cache/last_conversations.json` maps each cwd to its latest conversation.
That map is the only place tying a conversation to a folder, so two agy sessions started
in one cwd cannot be told apart: give each its own cwd (a worktree).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path

from mam.agents import convo
from mam.agents.base import AgentAdapter
from mam.errors import AgentError


class AgyAdapter(AgentAdapter):
    name = "agy"
    command = "agy"
    install_hint = "see Google Antigravity's install instructions"
    resume_args = ("--conversation", "{id}")
    exit_keys = (("text", "/exit"), ("key", "Enter"))
    env_keys = ("HOME", "ANTIGRAVITY_CLI_HOME")

    def root(self, env: Mapping[str, str]) -> Path:
        return convo.env_dir(env, "ANTIGRAVITY_CLI_HOME", convo.home(env) / ".gemini" / "antigravity-cli")

    def discover(self, *, cwd: str, since: float, env: Mapping[str, str]) -> str | None:
        try:
            latest = json.loads((self.root(env) / "cache" / "last_conversations.json").read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return None
        if not isinstance(latest, dict):
            return None
        for folder, conversation_id in latest.items():
            if not isinstance(conversation_id, str) or not convo.same_dir(str(folder), cwd):
                continue
            try:
                db = self._db(conversation_id, env)
            except AgentError:
                continue  # not an id agy would write
            # The map still names the cwd's previous conversation until the new one's first turn.
            if db.is_file() and convo.mtime(db) >= since - convo.TOLERANCE_S:
                return conversation_id
        return None

    def _db(self, conversation_id: str, env: Mapping[str, str]) -> Path:
        return self.root(env) / "conversations" / f"{convo.check_id(self.name, conversation_id)}.db"

    def conversation_files(self, conversation_id: str, *, cwd: str, env: Mapping[str, str]) -> list[Path]:
        db = self._db(conversation_id, env)
        sidecars = [db.with_name(db.name + suffix) for suffix in ("-wal", "-shm")]
        return [db, *sidecars, self.root(env) / "brain" / conversation_id]

    def conversation_exists(self, conversation_id: str, *, cwd: str, env: Mapping[str, str]) -> bool:
        return self._db(conversation_id, env).is_file()

    def purge_conversation(self, conversation_id: str, *, cwd: str, env: Mapping[str, str]) -> list[Path]:
        """Its .db and brain folder, then the cwd map's entries that still name it (agy starts a
        fresh conversation for a folder whose mapped one is gone, so dropping them changes nothing else)."""
        removed = super().purge_conversation(conversation_id, cwd=cwd, env=env)
        path = self.root(env) / "cache" / "last_conversations.json"
        try:
            latest = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return removed
        if isinstance(latest, dict) and conversation_id in latest.values():
            kept = {k: v for k, v in latest.items() if v != conversation_id}
            convo.write_private(path, json.dumps(kept, indent=2), mode=path.stat().st_mode & 0o777)
            removed.append(path)
        return removed


ADAPTER = AgyAdapter()
