"""Fixtures for the adapter tests: an explicit agent environment and a way to seed conversations.

Conversations are written by the fakes' own stores (tests/fakes/fake_stores.py), with explicit
start times, so discovery can be tested against several of them without any process running.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

import pytest

from mam.agents import known_agents
from tests.fakes.fake_stores import STORES

# Every adapter of mam/agents ADAPTERS but the demo agent: a new adapter is tested with no list to edit here.
AGENTS = tuple(a for a in known_agents() if a != "demo")
DISCOVERING = ("codex", "agy", "hermes", "opencode")  # the CLIs that pick their own id


@pytest.fixture
def agent_env(tmp_path: Path) -> dict[str, str]:
    """The environment mapping handed to adapters: only HOME, a folder of its own."""
    home = tmp_path / "agent-home"
    home.mkdir()
    return {"HOME": str(home)}


@pytest.fixture
def folders(tmp_path: Path) -> Callable[[str], str]:
    """folders('a') -> the absolute path of a fresh project folder named a."""

    def make(name: str) -> str:
        path = tmp_path / "projects" / name
        path.mkdir(parents=True, exist_ok=True)
        return str(path.resolve())

    return make


def seed(
    agent: str, env: dict[str, str], cwd: str, started: float, *, cid: str | None = None, text: str = "hello"
) -> str:
    """Write one conversation with one turn, as the fake CLI would have, started at `started`."""
    store = STORES[agent](env, cwd)
    cid = cid or store.new_id(started)
    store.create(cid, started)
    store.add_turn(cid, "user", text, started + 0.5)
    store.add_turn(cid, "assistant", "ok", started + 0.5)
    # File stores are also judged by modification time: make it match the story being told.
    for path in Path(env["HOME"]).rglob("*"):
        if cid in str(path) and path.is_file():
            os.utime(path, (started + 0.5, started + 0.5))
    return cid


def tree(root: Path) -> dict[str, bytes]:
    """Every file under root with its content (folders implied)."""
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}
