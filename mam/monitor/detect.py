"""Telling an agent process from anything else, from /proc (pane pid and its descendants)."""

from __future__ import annotations

import os
from dataclasses import dataclass

from mam.agents import get_adapter, known_agents
from mam.util.proc import children, cmdline

PYTHONS = ("python", "python3", "node", "bun", "deno")
DEMO_MODULE = "mam.agents.demo_agent"


@dataclass(frozen=True)
class FoundAgent:
    agent: str
    pid: int
    argv: tuple[str, ...]

    def flag(self, *names: str) -> str | None:
        """The value after one of `names` in the agent's argv (e.g. --session-id)."""
        for i, arg in enumerate(self.argv[:-1]):
            if arg in names:
                return self.argv[i + 1]
        return None


def _commands() -> dict[str, str]:
    out = {}
    for name in known_agents():
        if name == "demo":
            continue
        out[get_adapter(name).command] = name
    return out


def identify(argv: list[str]) -> str | None:
    if not argv:
        return None
    if DEMO_MODULE in argv:
        return "demo"
    commands = _commands()
    first = os.path.basename(argv[0])
    if first in commands:
        return commands[first]
    if first.rstrip("0123456789.") in PYTHONS and len(argv) > 1:
        return commands.get(os.path.basename(argv[1]))
    return None


def find_agent(pid: int | None, depth: int = 3) -> FoundAgent | None:
    """The agent process at `pid` or among its descendants (a shell may run it)."""
    if not pid:
        return None
    frontier = [pid]
    for _ in range(depth + 1):
        nxt = []
        for p in frontier:
            argv = cmdline(p)
            agent = identify(argv)
            if agent is not None:
                return FoundAgent(agent, p, tuple(argv))
            nxt.extend(children(p))
        frontier = nxt
    return None
