"""One human line per loop event worth a glance (for `mam loop` progress and `mam demo`)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from mam.outcomes import JobState


def _short(value: object, n: int = 120) -> str:
    return str(value)[:n]


_LINES: dict[str, Callable[[dict[str, Any]], str]] = {
    "start": lambda e: (
        f"{e['loop']} started: reviewers {', '.join(e['reviewers'])} ({e['chosen_by']}); "
        + (
            f"base {_short(e['base'], 12)} ({e['base_from']})"
            if e.get("identity")
            else f"no snapshot identity: {e.get('no_identity')}"
        )
    ),
    "plan": lambda e: f"plan written by {e['planner']} ({e['file']})",
    "plan-challenge": lambda e: f"plan challenge {e['turn']}: {_short(e['challenge'])}",
    "plan-answer": lambda e: f"plan revised by the planner (turn {e['turn']})",
    "plan-accepted": lambda e: f"plan accepted by the creator (turn {e['turn']})",
    "created": lambda e: f"creator done: {_short(e['result'])}",
    "subjobs-waiting": lambda e: f"round {e['round']}: waiting for {len(e['open'])} sub-job(s) of the creator",
    "snapshot": lambda e: (
        f"round {e['round']}"
        + (f" (attempt {e['attempt']})" if e["attempt"] > 1 else "")
        + ": reviewing "
        + (
            f"tree {e['identity']['tree'][:12]} (head {_short(e['identity']['head'], 12)})"
            if e.get("identity")
            else "without identity"
        )
    ),
    "verdict": lambda e: (
        f"round {e['round']}: {e['reviewer']}: {e['verdict']}" + (f" ({e['reason']})" if not e["wellformed"] else "")
    ),
    "discarded": lambda e: f"round {e['round']}: {e['message']}",
    "fixed": lambda e: f"round {e['round']}: creator fixed: {_short(e['result'])}",
    "rebut": lambda e: (
        f"round {e['round']}: creator rebutted"
        + (f" ({e['used']} of {e['limit']})" if e["accepted"] else f": {e['message']}")
    ),
    "job-end": lambda e: (
        f"{e['kind']} job {e['job']} on {e['session']} {e['state']} ({e['reason']})"
        if e["state"] != JobState.COMPLETED
        else ""
    ),
    "needs_approval": lambda e: (
        f"round {e['round']}: waiting for approval of {e['branch']} into {e['base_branch']} "
        f"(tree {_short((e.get('identity') or {}).get('tree'), 12)}): {e['message']}"
    ),
    "decision": lambda e: f"round {e['round']}: {e['state']} by {e['by']}",
    "end": lambda e: f"{e['loop']} ended: {e['state']} ({e['reason']})",
}


def describe(event: dict[str, Any]) -> str:
    """The line for `event`, or '' for events not worth a line (job transitions, ...)."""
    line = _LINES.get(event.get("event", ""))
    try:
        return line(event) if line else ""
    except (KeyError, TypeError, IndexError):
        return str(event.get("event", ""))
