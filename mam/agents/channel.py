"""What a delivery channel (a CLI's own server taking a job's brief as a turn, instead of a paste)
answers, shared by every CLI that has one: opencode (mam.agents.opencode_server) and codex
(mam.agents.codex_server).

A channel delivery has two parts. First the steps that take nothing (reach the server, find the
conversation the pane shows): any failure there leaves the paste free to go ahead. Then the one
request that starts the turn: refused, it took nothing; sent with no answer, it may have started
the turn, and pasting after it could type the brief twice.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from enum import Enum


class Sent(Enum):
    DELIVERED = "delivered"  # the server took the prompt: a turn started
    UNAVAILABLE = "unavailable"  # nothing was taken: the paste may go ahead
    UNKNOWN = "unknown"  # the prompt went out but no answer came: never paste after it


@dataclass(frozen=True)
class Outcome:
    sent: Sent
    why: str = ""
    conversation_id: str = ""


class Refused(Exception):
    """Nothing was taken: no connection, or a refusal (a wrong secret, no such conversation...)."""


class NoAnswer(Exception):
    """The request went out and no answer came, or a server error: it may have been taken."""


def deliver(find: Callable[[], str], start: Callable[[str], None]) -> Outcome:
    """`find()` the conversation to start the turn in (its id), then `start(id)` the turn. Only `start`
    can leave an unknown outcome; every step of `find` either works or took nothing."""
    try:
        conversation_id = find()
    except (Refused, NoAnswer) as e:  # nothing typed yet: the paste may go ahead
        return Outcome(Sent.UNAVAILABLE, str(e))
    try:
        start(conversation_id)
    except Refused as e:
        return Outcome(Sent.UNAVAILABLE, str(e), conversation_id)
    except NoAnswer as e:  # it may have started a turn: never paste after it
        return Outcome(Sent.UNKNOWN, str(e), conversation_id)
    return Outcome(Sent.DELIVERED, "", conversation_id)
