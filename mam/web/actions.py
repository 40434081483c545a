"""What a person may do from the page: each action is the library call of its CLI command, asked first.

The page draws a button for each action a row's `actions` names, asks the action's question, and
sends `POST /api/<subject>/<id>/<name>`. An action for a command mam does not have yet is simply
not in `ACTIONS`: add one here when its command lands (job pause / resume: `mam job pause`,
`mam job resume`; the workspace's hold: `mam pause --all`, `mam resume --all`; loop reject, which
needs a note typed on the page; a permission prompt's allow once / deny), and the page offers it
with no other change.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from mam.jobs.outcomes import TERMINAL
from mam.settings import Settings
from mam.workspace import Workspace


@dataclass(frozen=True)
class Action:
    name: str
    subject: str  # job / session / loop / workspace
    label: str
    question: str  # asked before it is sent; "{id}" is the row's id
    applies: Callable[[dict[str, Any]], bool]
    run: Callable[[Workspace, Settings, str], dict[str, Any]]


def cancel_job(ws: Workspace, settings: Settings, job_id: str) -> dict[str, Any]:
    """`mam job cancel ID`."""
    from mam.jobs.queries import cancel, existing_registry

    registry = existing_registry(ws, job_id)
    try:
        return cancel(ws, registry, job_id)
    finally:
        registry.close()


def approve_loop(ws: Workspace, settings: Settings, loop_id: str) -> dict[str, Any]:
    """`mam loop approve ID` (a fast-forward): merges only while the branch holds the reviewed tree."""
    from mam.loop.approval import approve

    return approve(ws, loop_id, via="web")


ACTIONS: tuple[Action, ...] = (
    Action(
        "cancel",
        "job",
        "Cancel",
        "Cancel job {id}? The brief already in the pane is not taken back.",
        lambda row: row.get("state") not in {s.value for s in TERMINAL},
        cancel_job,
    ),
    Action(
        "approve",
        "loop",
        "Approve",
        "Approve loop {id}? Its reviewed branch is fast-forwarded into its base branch, only if the branch "
        "still holds exactly the reviewed tree (else the loop reviews it again).",
        lambda row: row.get("state") == "needs_approval",
        approve_loop,
    ),
)


def find(subject: str, name: str) -> Action | None:
    return next((a for a in ACTIONS if a.subject == subject and a.name == name), None)


def offered(subject: str, row: dict[str, Any]) -> list[dict[str, str]]:
    """The actions the page may offer on one row: name, label and the question to ask."""
    ident = str(row.get("id") or row.get("name"))
    return [
        {"name": a.name, "label": a.label, "question": a.question.replace("{id}", ident)}
        for a in ACTIONS
        if a.subject == subject and a.applies(row)
    ]
