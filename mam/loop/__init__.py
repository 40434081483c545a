"""Review loops: planner / creator / reviewer rounds over one task, until every reviewer passes.

`run_loop(LoopRequest(...), ws=, settings=, registry=, on_event=, environ=) -> LoopResult` is
the one entry point (`mam loop` and `mam demo` call it). Imported lazily, so the small
modules here (verdict, snapshot, worktree) load without the delegation machinery.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from mam.loop.model import LoopRequest, LoopResult
    from mam.loop.run import run_loop

__all__ = ["LoopRequest", "LoopResult", "run_loop"]


def __getattr__(name: str) -> Any:
    if name in ("LoopRequest", "LoopResult"):
        from mam.loop import model

        return getattr(model, name)
    if name == "run_loop":
        from mam.loop.run import run_loop

        return run_loop
    raise AttributeError(f"module 'mam.loop' has no attribute {name!r}")
