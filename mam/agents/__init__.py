"""Agent adapters: one small module per agent CLI, each defining `ADAPTER`, listed in `ADAPTERS`.

Adding an agent is one module (`mam/agents/<name>.py` with `ADAPTER = <AgentAdapter subclass>()`)
and one row in `ADAPTERS`. Modules are imported when their adapter is first asked for.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING

from mam.errors import AgentError

if TYPE_CHECKING:
    from mam.agents.base import AgentAdapter

# agent name (`--agent`) -> the module defining its ADAPTER
ADAPTERS: dict[str, str] = {
    "agy": "mam.agents.agy",
    "claude": "mam.agents.claude",
    "codex": "mam.agents.codex",
    "demo": "mam.demo.adapter",
    "gemini": "mam.agents.gemini",
    "grok": "mam.agents.grok",
    "hermes": "mam.agents.hermes",
    "opencode": "mam.agents.opencode",
}


def known_agents() -> list[str]:
    """Every agent name `mam session create --agent` accepts, sorted."""
    return sorted(ADAPTERS)


def get_adapter(name: str) -> AgentAdapter:
    module_name = ADAPTERS.get(name)
    if module_name is None:
        raise AgentError(f"unknown agent {name!r}; known agents: {', '.join(known_agents())}", agent=name)
    adapter: AgentAdapter | None = getattr(importlib.import_module(module_name), "ADAPTER", None)
    if adapter is None:
        raise AgentError(f"{module_name} defines no ADAPTER", agent=name)
    return adapter
