"""Agent adapters: one small module per agent CLI, each defining `ADAPTER`.

Adding an agent is one file: `mam/agents/<name>.py` with `ADAPTER = <AgentAdapter subclass>()`.
"""

from __future__ import annotations

import importlib
import pkgutil
from typing import TYPE_CHECKING

from mam.errors import AgentError

if TYPE_CHECKING:
    from mam.agents.base import AgentAdapter

_NOT_ADAPTERS = {"base", "launch", "demo_agent", "convo", "trust"}


def known_agents() -> list[str]:
    """Names of every adapter module in this package."""
    import mam.agents as pkg

    return sorted(
        m.name for m in pkgutil.iter_modules(pkg.__path__) if m.name not in _NOT_ADAPTERS and not m.name.startswith("_")
    )


def get_adapter(name: str) -> AgentAdapter:
    if name not in known_agents():
        raise AgentError(f"unknown agent {name!r}; known agents: {', '.join(known_agents())}", agent=name)
    module = importlib.import_module(f"mam.agents.{name}")
    adapter = getattr(module, "ADAPTER", None)
    if adapter is None:
        raise AgentError(f"mam.agents.{name} defines no ADAPTER", agent=name)
    return adapter  # type: ignore[no-any-return]
