"""What a person may do from the page: each action is the library call of its CLI command, asked first.

The page draws a button for each action a row's `actions` names, asks the action's question, and
sends `POST /api/<subject>/<id>/<name>` with the action's `body` (JSON: what the person saw, such
as the tool a prompt is for). An action for a command mam does not have yet is simply not in
`ACTIONS`: add one here when its command lands, and the page offers it with no other change. An action
whose question takes a typed answer (a loop's rejection note) says `asks_note`: the page sends it as
`note`. The workspace's own actions (the hold) are on the row `{"id": "all", "held": ...}`.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from mam.errors import UsageError
from mam.outcomes import TERMINAL, JobState
from mam.settings import Settings
from mam.workspace import Workspace


@dataclass(frozen=True)
class Asked:
    """One click's request: the body the page sent (what the person saw) and who sent it."""

    body: dict[str, Any] = field(default_factory=dict)
    by: dict[str, Any] = field(default_factory=dict)  # user (who serves the page), via, from (the browser's address)


@dataclass(frozen=True)
class Action:
    name: str
    subject: str  # job / session / loop / workspace
    label: str
    question: str  # asked before it is sent; "{id}" is the row's id, "{tool}" the tool its prompt is for
    applies: Callable[[dict[str, Any]], bool]
    run: Callable[[Workspace, Settings, str, Asked], dict[str, Any]]
    body: tuple[tuple[str, str], ...] = ()  # (name, the row's field) the page sends back with the click
    asks_note: bool = False  # the question takes a typed answer, sent as `note` (a loop's rejection)


def cancel_job(ws: Workspace, settings: Settings, job_id: str, _asked: Asked) -> dict[str, Any]:
    """`mam job cancel ID`."""
    return dict(_node_in(ws, "cancel", job=job_id))


def _who(asked: Asked) -> str:
    return f"{asked.by.get('user') or 'someone'} via web"


def _node_in(ws: Workspace, op: str, **args: Any) -> Any:
    """`op` of the node protocol in workspace `ws`, as the CLI's command runs it (mam.node.call; a page
    carries no caller's settings: the workspace's `.mam.env` holds)."""
    from mam.node.call import value

    return value(ws.root, op, {k: v for k, v in args.items() if v is not None}, environ={})


def pause_job(ws: Workspace, settings: Settings, job_id: str, asked: Asked) -> dict[str, Any]:
    """`mam job pause ID` (safe: the agent finishes its turn)."""
    return dict(_node_in(ws, "pause", job=job_id, by=_who(asked)))


def resume_job(ws: Workspace, settings: Settings, job_id: str, asked: Asked) -> dict[str, Any]:
    """`mam job resume ID`."""
    return dict(_node_in(ws, "resume", job=job_id, by=_who(asked)))


def hold(which: str) -> Callable[[Workspace, Settings, str, Asked], dict[str, Any]]:
    """`mam pause --all` (safe) / `mam resume --all`."""

    def run(ws: Workspace, settings: Settings, _ident: str, asked: Asked) -> dict[str, Any]:
        return dict(_node_in(ws, "hold" if which == "pause" else "release", by=_who(asked)))

    return run


def approve_loop(ws: Workspace, settings: Settings, loop_id: str, _asked: Asked) -> dict[str, Any]:
    """`mam loop approve ID` (a fast-forward): merges only while the branch holds the reviewed tree."""
    from mam.loop.approval import approve

    return approve(ws, loop_id, via="web")


def reject_loop(ws: Workspace, settings: Settings, loop_id: str, asked: Asked) -> dict[str, Any]:
    """`mam loop reject ID --note TEXT`: the creator gets the note and another round runs."""
    from mam.loop.approval import reject

    note = asked.body.get("note")
    if not isinstance(note, str) or not note.strip():
        raise UsageError("a rejection needs a note: say what the creator should change")
    return reject(ws, loop_id, note=note, via="web")


def answer(which: str) -> Callable[[Workspace, Settings, str, Asked], dict[str, Any]]:
    """Allow once / deny the permission prompt a session waits on (mam.sessions.answer: typed only while
    its pane shows exactly that prompt for the tool the page showed)."""

    def run(ws: Workspace, settings: Settings, name: str, asked: Asked) -> dict[str, Any]:
        from mam.sessions.answer import answer_prompt

        tool = asked.body.get("tool")
        return answer_prompt(ws, settings, name, tool=tool if isinstance(tool, str) else "", answer=which, by=asked.by)

    return run


def _prompted(row: dict[str, Any]) -> bool:
    from mam.sessions.answer import answerable

    return row.get("state") == "waiting" and bool(row.get("waiting_tool")) and answerable(str(row.get("agent")))


ACTIONS: tuple[Action, ...] = (
    Action(
        "cancel",
        "job",
        "Cancel",
        "Cancel job {id}? Its agent's turn on it is interrupted (the agent keeps running).",
        lambda row: row.get("state") not in {s.value for s in TERMINAL},
        cancel_job,
    ),
    Action(
        "pause",
        "job",
        "Pause",
        "Pause job {id}? The agent finishes its turn; nothing more is typed into its session until you resume it.",
        lambda row: row.get("state") not in {*(s.value for s in TERMINAL), JobState.PAUSED.value},
        pause_job,
    ),
    Action(
        "resume",
        "job",
        "Resume",
        "Resume job {id}? A short resume brief is typed into its session.",
        lambda row: row.get("state") == JobState.PAUSED.value,
        resume_job,
    ),
    Action(
        "pause",
        "workspace",
        "Pause all",
        "Pause every open job and type nothing anywhere in this workspace until you resume all?",
        lambda row: not row.get("held"),
        hold("pause"),
    ),
    Action(
        "resume",
        "workspace",
        "Resume all",
        "Release the hold and resume every paused job?",
        lambda row: bool(row.get("held")),
        hold("resume"),
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
    Action(
        "reject",
        "loop",
        "Reject",
        "Reject loop {id}? Say what its creator should change (it gets your note and another round runs):",
        lambda row: row.get("state") == "needs_approval",
        reject_loop,
        asks_note=True,
    ),
    Action(
        "allow",
        "session",
        "Allow once",
        "Allow {id} to run {tool}, this once? mam types the answer only if the pane still shows exactly this prompt.",
        _prompted,
        answer("allow"),
        (("tool", "waiting_tool"),),
    ),
    Action(
        "deny",
        "session",
        "Deny",
        "Deny {id} running {tool}? mam types the answer only if the pane still shows exactly this prompt.",
        _prompted,
        answer("deny"),
        (("tool", "waiting_tool"),),
    ),
)


def find(subject: str, name: str) -> Action | None:
    return next((a for a in ACTIONS if a.subject == subject and a.name == name), None)


def offered(subject: str, row: dict[str, Any]) -> list[dict[str, Any]]:
    """The actions the page may offer on one row: name, label, the question to ask and the body to send."""
    ident = str(row.get("id") or row.get("name"))
    tool = str(row.get("waiting_tool") or "")
    return [
        {
            "name": a.name,
            "label": a.label,
            "question": a.question.replace("{id}", ident).replace("{tool}", tool),
            "body": {name: row.get(key) for name, key in a.body},
            "note": a.asks_note,
        }
        for a in ACTIONS
        if a.subject == subject and a.applies(row)
    ]
