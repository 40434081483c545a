"""What an `activity` event (sent by `mam hook` from the agent CLI's own lifecycle hooks) does to a job.

Activity never counts as a sign of life: the deadlines keep running while the agent works or waits
for a person. It records what the agent does (`activity`), whether it waits for a person (`waiting`:
since, tool, message) and how many turns ended while the job was open (`turn_ends`, for reminders).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from mam.jobs.model import Event, Job

STATES = ("working", "waiting", "idle", "ended")
# The hook names that mean "the agent's turn is over" (Claude's Stop, codex's notify, gemini's AfterAgent...).
TURN_END = "turn_end"
MAX_TEXT = 400


def body_of(state: str, *, source: str, tool: str = "", message: str = "", turn_end: bool = False) -> dict[str, Any]:
    """The body of an `activity` event."""
    body: dict[str, Any] = {"state": state, "source": source[:80]}
    if tool:
        body["tool"] = tool[:MAX_TEXT]
    if message:
        body["message"] = message[:MAX_TEXT]
    if turn_end:
        body[TURN_END] = True
    return body


def apply(job: Job, ev: Event) -> Job:
    body: Mapping[str, Any] = ev.body
    state = str(body.get("state", ""))
    if state not in STATES:
        return job
    waiting = job.waiting
    if state == "waiting":
        tool, message = str(body.get("tool", ""))[:MAX_TEXT], str(body.get("message", ""))[:MAX_TEXT]
        if waiting is None:
            waiting = {"since": ev.at, "tool": tool, "message": message}
        else:  # a later hook about the same prompt (Notification after PermissionRequest) adds what it knows
            waiting = {
                "since": waiting.get("since", ev.at),
                "tool": waiting.get("tool") or tool,
                "message": waiting.get("message") or message,
            }
    else:
        waiting = None
    ends = job.turn_ends + (1 if body.get(TURN_END) is True else 0)
    return replace(job, activity=state, activity_ms=ev.at, waiting=waiting, turn_ends=ends)


def blocked_detail(job: Job) -> str:
    """Why a job that ends by a deadline did not move: it waited for a person ('' if not)."""
    waiting = job.waiting
    if not waiting:
        return ""
    tool, message = str(waiting.get("tool") or ""), str(waiting.get("message") or "")
    if tool:
        return f"waiting for permission: {tool}"
    return f"waiting for input: {message}" if message else "waiting for input"
