"""The review-loop part of `mam demo`: a creator and two demo reviewers, one of which says
NOT PASS in round 1; the creator applies its findings and both pass in round 2.

`mam demo` has already made the workspace a git repo and created the `creator` session.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

from mam.loop.describe import describe
from mam.loop.model import LoopRequest
from mam.loop.run import run_loop
from mam.sessions.create import CreateRequest, create_session
from mam.settings import Settings
from mam.store.registry import Registry
from mam.workspace import Workspace

REVIEWERS = (("reviewer-1", "NOT PASS,PASS"), ("reviewer-2", "PASS"))
TASK = "Say goodbye.\ndemo-write: goodbye.txt :: goodbye from the demo loop\ndemo-commit: add goodbye.txt"


def demo_request(creator: str = "creator") -> LoopRequest:
    """Two rounds at most, no rebuttals; deadlines generous enough for a loaded machine."""
    return LoopRequest(
        creator=creator,
        reviewers=tuple(name for name, _ in REVIEWERS),
        task=TASK,
        max_loop=2,
        max_rebut=0,
        start_deadline_s=30,
        heartbeat_s=1,
        timeout_s=120,
        slug="demo-goodbye",
    )


def demo_loop(
    *,
    ws: Workspace,
    settings: Settings,
    registry: Registry,
    environ: Mapping[str, str],
    say: Callable[[str], None],
    creator: str = "creator",
) -> dict[str, object]:
    """Create the two demo reviewers, run the loop, and return a summary for `mam demo`."""

    for name, verdicts in REVIEWERS:
        if registry.find_session(name) is None:
            row = create_session(
                CreateRequest(name=name, agent="demo", role="reviewer", cwd=str(ws.root)),
                ws=ws,
                settings=settings,
                registry=registry,
                environ={**environ, "MAM_DEMO_VERDICTS": verdicts},
            )
            say(f"session {name}: demo reviewer (verdicts {verdicts}) in pane {row.pane_id}")

    def show(event: dict[str, object]) -> None:
        text = describe(event)
        if text:
            say(f"loop     {text}")

    result = run_loop(
        demo_request(creator), ws=ws, settings=settings, registry=registry, on_event=show, environ=environ
    )
    verdicts = "; ".join(
        f"round {h['round']}: " + ", ".join(f"{r['reviewer']} {r['verdict']}" for r in h["reviews"])
        for h in result.history
    )
    return {
        "exit_code": result.exit_code,
        "state": result.state,
        "loop_id": result.loop_id,
        "rounds": result.rounds,
        "promoted": result.promoted,
        "summary": f"{result.state} in {result.rounds} round(s) ({verdicts})",
        "result": result.as_dict(),
    }
