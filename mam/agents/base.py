"""The AgentAdapter base: what mam must know about an agent CLI, declared in a small subclass.

An adapter knows how to launch the CLI, how its conversation id is known (given at launch,
or discovered afterwards from its on-disk store, matched by cwd and start time), how to
resume it, how to leave it gracefully, and where its conversation files are. It never
starts panes itself: sessions do that with the argv the adapter returns.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Mapping
from pathlib import Path
from typing import ClassVar

from mam.errors import AgentError

# A keystroke step: ("text", "/exit") types literal text; ("key", "Enter") presses a named key.
KeyStep = tuple[str, str]


class AgentAdapter:
    name: ClassVar[str] = ""
    command: ClassVar[str] = ""  # the executable, looked up on the pane's PATH
    id_at_launch: ClassVar[bool] = False  # True: mam chooses the conversation id and passes it at launch
    exit_keys: ClassVar[tuple[KeyStep, ...]] = (("key", "C-d"),)
    # Environment variables that change where the CLI keeps its conversations; recorded per session.
    env_keys: ClassVar[tuple[str, ...]] = ("HOME",)
    # Markers real UIs show instead of a long pasted text while it waits in the input box.
    paste_placeholders: ClassVar[tuple[str, ...]] = ()
    # Text the CLI shows once its input box is ready for a paste (None: ready as soon as it runs).
    ready_marker: ClassVar[str | None] = None
    # argv templates; "{id}" is replaced by the conversation id.
    launch_args: ClassVar[tuple[str, ...]] = ()  # extra args of every fresh launch
    launch_id_args: ClassVar[tuple[str, ...]] = ()  # how to pass a chosen id at launch (id_at_launch only)
    resume_args: ClassVar[tuple[str, ...]] = ()  # e.g. ("--resume", "{id}") or ("resume", "{id}")

    # -- launching ----------------------------------------------------------------------------
    def new_conversation_id(self) -> str | None:
        """A fresh id when the CLI accepts one at launch, else None."""
        return str(uuid.uuid4()) if self.id_at_launch else None

    def launch_argv(self, conversation_id: str | None) -> list[str]:
        argv = [self.command, *self.launch_args]
        if conversation_id and self.id_at_launch:
            argv += [a.replace("{id}", conversation_id) for a in self.launch_id_args]
        return argv

    def resume_argv(self, conversation_id: str) -> list[str]:
        if not self.resume_args:
            raise AgentError(f"{self.name} has no resume command")
        return [self.command, *(a.replace("{id}", conversation_id) for a in self.resume_args)]

    # -- conversations ------------------------------------------------------------------------
    def home(self, env: Mapping[str, str]) -> Path:
        home = env.get("HOME") or os.path.expanduser("~")
        return Path(home)

    def discover(self, *, cwd: str, since: float, env: Mapping[str, str]) -> str | None:
        """The id of the conversation this CLI started in `cwd` at or after `since` (None if not yet written)."""
        return None

    def conversation_files(self, conversation_id: str, *, cwd: str, env: Mapping[str, str]) -> list[Path]:
        """Every file or folder that belongs to that conversation and nothing else."""
        return []

    def conversation_exists(self, conversation_id: str, *, cwd: str, env: Mapping[str, str]) -> bool:
        return any(p.exists() for p in self.conversation_files(conversation_id, cwd=cwd, env=env))

    def purge_conversation(self, conversation_id: str, *, cwd: str, env: Mapping[str, str]) -> list[Path]:
        """Delete that conversation's files (and nothing else); return what was removed."""
        import shutil

        removed = []
        for path in self.conversation_files(conversation_id, cwd=cwd, env=env):
            if path.is_dir():
                shutil.rmtree(path)
                removed.append(path)
            elif path.exists():
                path.unlink()
                removed.append(path)
        return removed

    def check_resumable(self, conversation_id: str, *, cwd: str, env: Mapping[str, str]) -> None:
        """Raise AgentError with a clear message when the conversation cannot be resumed."""
        if not conversation_id:
            raise AgentError(f"{self.name}: no conversation id was recorded for this session; it cannot be resumed")
        if not self.conversation_exists(conversation_id, cwd=cwd, env=env):
            raise AgentError(
                f"{self.name}: conversation {conversation_id} not found (its files are gone); "
                "it cannot be resumed: create a new session instead",
                conversation_id=conversation_id,
            )

    # -- input box ----------------------------------------------------------------------------
    def is_ready(self, screen: str) -> bool:
        return self.ready_marker is None or self.ready_marker in screen

    def input_pending(self, screen: str, nonce: str) -> bool:
        """Heuristic used only to decide whether to press Enter again (never to decide a job's outcome):
        the brief's nonce or a paste placeholder is still visible at the bottom of the screen."""
        tail = "\n".join(screen.rstrip("\n").splitlines()[-12:])
        return nonce in tail or any(p in tail for p in self.paste_placeholders)

    def agent_env(self, env: Mapping[str, str]) -> dict[str, str]:
        """The subset of `env` that locates this CLI's files (stored on the session row)."""
        return {k: env[k] for k in self.env_keys if k in env}

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self.name}>"
