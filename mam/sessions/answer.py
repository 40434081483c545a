"""Answer a permission prompt a session's agent waits on (allow once / deny), for a person who asked.

mam answers nothing by itself: this runs only when a person clicks (`mam web`). It types only
when every one of these holds at that moment, else it types nothing and says why:
  - the session's hooks say it waits on a permission prompt for exactly `tool` (what the person saw);
  - its pane shows a permission prompt laid out as the captured one of that CLI and version
    (`AgentAdapter.permission_prompt`) for exactly that tool call, unchanged for STEADY_S (Claude
    2.1.332 drops an Enter that comes a moment after its prompt shows: seen with a real one);
  - after moving the selection (arrow keys, which answer nothing), the pane shows the same prompt
    with the wanted option selected: only then Enter.
Then it looks for the prompt to go (TAKEN_S): one still up means the CLI did not take the answer,
and the person is told so (nothing more is typed).
Who answered goes to the audit log of the job the session works on (`.mam/delegate_job_logs/<job>/
audit.jsonl`, kind `permission_answered`), else to the session's own `.mam/sessions/<name>/answers.jsonl`.
"""

from __future__ import annotations

import json
import os
import threading
import time
from typing import Any

from mam.agents import get_adapter
from mam.agents.base import AgentAdapter, PermissionPrompt
from mam.errors import SessionNotFound, SessionRefused
from mam.hooks import session_state
from mam.ids import check_name
from mam.panes.base import PaneBackend
from mam.sessions.common import backend_for
from mam.sessions.screen import strip_controls
from mam.settings import Settings
from mam.store import jobs as jobs_table
from mam.store import journal
from mam.store.registry import Registry
from mam.workspace import Workspace

ANSWERS = ("allow", "deny")
SETTLE_S = 3.0  # for the CLI to redraw the selection after an arrow key
STEADY_S = 1.5  # how long the prompt must have shown, unchanged, before a key goes to it
TAKEN_S = 5.0  # for the prompt to go once answered
LINES = 300  # the prompt is at the bottom; further up, the CLI's banner names its version
_lock = threading.Lock()  # one answer at a time in this process: two clicks never type two Enters


def answerable(agent: str) -> bool:
    """Whether mam can read (and so answer) this agent's permission prompts."""
    try:
        return bool(get_adapter(agent).prompt_version)
    except Exception:
        return False


def answer_prompt(
    ws: Workspace, settings: Settings, name: str, *, tool: str, answer: str, by: dict[str, Any]
) -> dict[str, Any]:
    """Allow once or deny the prompt for `tool` that session `name` waits on; SessionRefused (typing
    nothing more) unless the pane shows exactly that prompt."""
    check_name(name)
    if answer not in ANSWERS:
        raise SessionRefused(f"answer {answer!r}: allow or deny")
    if not tool:
        raise SessionRefused("which tool call the prompt is for: the page sends the one it showed")
    registry = Registry.open_existing(ws)
    row = registry.find_session(name) if registry is not None else None
    try:
        if row is None:
            raise SessionNotFound(f"no session {name!r} in this workspace")
        waiting = session_state.read(ws, name).get("waiting") or {}
        if waiting.get("tool") != tool:
            raise SessionRefused(f"session {name} is not waiting on a permission prompt for {tool}")
        adapter = get_adapter(row.agent)
        if not adapter.prompt_version:
            raise SessionRefused(f"mam does not answer {row.agent}'s permission prompts: answer it in the pane")
        if not row.pane_id:
            raise SessionRefused(f"session {name} has no pane")
        backend = backend_for(row, settings=settings, ws=ws)
        with _lock:
            prompt = _steady(adapter, backend, row.pane_id, tool)
            target = prompt.allow if answer == "allow" else prompt.deny
            _select(adapter, backend, row.pane_id, tool, prompt, target)
            backend.send_keys(row.pane_id, "Enter")
            taken = _gone(adapter, backend, row.pane_id, tool)
        record = {
            "session": name,
            "agent": row.agent,
            "verified_version": adapter.prompt_version,
            "tool": tool,
            "answer": answer,
            "option": prompt.options[target],
            "by": by,
            "taken": taken,
        }
        record["job"] = _audit(ws, registry, name, record) if registry is not None else ""
        if not taken:
            raise SessionRefused(
                f"{row.agent} did not take the answer: its prompt for {tool} is still up (nothing more typed); "
                "try again, or answer it in the pane"
            )
        return record
    finally:
        if registry is not None:
            registry.close()


def _shown(adapter: AgentAdapter, backend: PaneBackend, pane_id: str, tool: str) -> PermissionPrompt:
    prompt = adapter.permission_prompt(strip_controls(backend.capture(pane_id, lines=LINES)))
    if prompt is None:
        raise SessionRefused(
            f"the pane shows no permission prompt laid out as {adapter.name} {adapter.prompt_version}'s: "
            "nothing typed (answer it in the pane)"
        )
    if prompt.tool != tool:
        raise SessionRefused(f"the pane's prompt is for {prompt.tool}, not {tool}: nothing typed")
    return prompt


def _steady(adapter: AgentAdapter, backend: PaneBackend, pane_id: str, tool: str) -> PermissionPrompt:
    """The prompt for `tool`, once it has shown unchanged for STEADY_S (SessionRefused if it goes)."""
    prompt = _shown(adapter, backend, pane_id, tool)
    since = time.monotonic()
    while time.monotonic() - since < STEADY_S:
        time.sleep(0.1)
        now = _shown(adapter, backend, pane_id, tool)
        if now != prompt:
            prompt, since = now, time.monotonic()
    return prompt


def _gone(adapter: AgentAdapter, backend: PaneBackend, pane_id: str, tool: str) -> bool:
    """Whether the prompt for `tool` left the pane within TAKEN_S."""
    until = time.monotonic() + TAKEN_S
    while time.monotonic() < until:
        shown = adapter.permission_prompt(strip_controls(backend.capture(pane_id, lines=LINES)))
        if shown is None or shown.tool != tool:
            return True
        time.sleep(0.1)
    return False


def _select(
    adapter: AgentAdapter, backend: PaneBackend, pane_id: str, tool: str, prompt: PermissionPrompt, target: int
) -> None:
    """Move the selection to `target` (arrow keys answer nothing) and see it there, same prompt."""
    moves = target - prompt.selected
    for _ in range(abs(moves)):
        backend.send_keys(pane_id, "Down" if moves > 0 else "Up")
    until = time.monotonic() + SETTLE_S
    while prompt.selected != target:
        if time.monotonic() > until:
            raise SessionRefused(
                f"the prompt's selection did not reach {prompt.options[target]!r}: nothing answered (Enter not sent)"
            )
        time.sleep(0.05)
        prompt = _shown(adapter, backend, pane_id, tool)


def _audit(ws: Workspace, registry: Registry, name: str, record: dict[str, Any]) -> str:
    """Write who answered: to the audit log of the session's open job, else to the session's answers.jsonl."""
    with registry.read() as conn:
        jobs = jobs_table.open_jobs(conn, name)
    line = {k: v for k, v in record.items() if k != "session"}
    if jobs:
        journal.commit(registry, journal.Transition(jobs[0].id, lines=[("permission_answered", line)]))
        return jobs[0].id
    folder = ws.session_dir(name)
    folder.mkdir(mode=0o700, parents=True, exist_ok=True)
    fd = os.open(folder / "answers.jsonl", os.O_WRONLY | os.O_CREAT | os.O_APPEND | os.O_NOFOLLOW, 0o600)
    with os.fdopen(fd, "a") as f:
        f.write(json.dumps({"ts": time.time(), **line}) + "\n")
    return ""
