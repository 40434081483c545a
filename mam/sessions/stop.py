"""Stop a session gracefully and keep its conversation id so it can be resumed."""

from __future__ import annotations

import time

from mam.agents import get_adapter
from mam.agents.base import AgentAdapter
from mam.errors import UsageError
from mam.ids import check_name
from mam.panes.base import PaneBackend
from mam.sessions.common import backend_for
from mam.sessions.create import discover
from mam.settings import Settings
from mam.store.registry import Registry
from mam.store.sessions import LIVE, SessionRow, SessionStatus
from mam.util.poll import Timeout, wait_for
from mam.workspace import Workspace

# How long to wait after an Escape before the next key, so it is not read as Alt+key.
ESCAPE_PAUSE_S = 0.3


def stop_session(
    name: str,
    *,
    ws: Workspace,
    settings: Settings,
    registry: Registry,
    purge_conversation: bool = False,
    yes: bool = False,
    grace: float = 15.0,
    paused_job: str = "",
) -> SessionRow:
    """Exit the agent and close its pane, its conversation id kept. `paused_job`: a hard pause of that job stops
    it, and the session's next delegation relaunches it (recorded on the row in the same write); any other stop
    is a person's, and clears that."""
    if purge_conversation and not yes:
        raise UsageError(
            "--purge-conversation deletes this session's conversation files for good; add --yes to confirm"
        )
    row = registry.session(check_name(name))
    adapter = get_adapter(row.agent)
    if row.status in LIVE and row.pane_id:
        backend = backend_for(row, settings=settings, ws=ws)
        exit_agent(backend, row.pane_id, adapter, grace=grace)
    conversation_id = row.conversation_id
    if conversation_id is None and row.launched_at:
        conversation_id = discover(adapter, cwd=row.cwd, since=row.launched_at, env=row.agent_env, timeout=0)
    note = "stopped"
    if paused_job:
        note = f"stopped by the hard pause of {paused_job}: relaunched by its resume, or by the session's next job"
    if purge_conversation and conversation_id:
        removed = adapter.purge_conversation(conversation_id, cwd=row.cwd, env=row.agent_env)
        note = f"stopped; conversation {conversation_id} purged ({len(removed)} path(s))"
        # The id stays on the row (resumable false) so a later resume can say which conversation is gone.
    resumable = bool(conversation_id) and adapter.conversation_exists(
        conversation_id or "", cwd=row.cwd, env=row.agent_env
    )
    return registry.update_session(
        name,
        status=SessionStatus.STOPPED,
        conversation_id=conversation_id,
        resumable=resumable,
        pane_id=None,
        pane_pid=None,
        note=note,
        stopped_by_pause=paused_job,
    )


def exit_agent(backend: PaneBackend, pane_id: str, adapter: AgentAdapter, *, grace: float) -> bool:
    """Send the agent's exit keystrokes, wait for it to end, then close the pane. True if it exited by itself."""

    def ended() -> bool:
        info = backend.pane(pane_id)
        return info is None or info.dead

    grace = max(grace, adapter.exit_grace_s)
    graceful = ended()
    if not graceful:
        for attempt in range(2):
            press(backend, pane_id, adapter.exit_keys)
            try:
                wait_for(ended, timeout=grace / 2, interval=0.1)
                graceful = True
                break
            except Timeout:
                if attempt == 0:
                    backend.send_keys(pane_id, "Escape")
                    # A key right after Escape reads as an Alt chord in some TUIs (opencode: Escape, C-x).
                    time.sleep(ESCAPE_PAUSE_S)
    backend.kill_pane(pane_id)  # ends an agent deaf to the hang-up too
    return graceful


def press(backend: PaneBackend, pane_id: str, steps: tuple[tuple[str, str], ...]) -> None:
    for kind, value in steps:
        if kind == "pause":
            time.sleep(float(value))  # the CLI needs a gap between these keys (not a wait for an outcome)
            continue
        if kind == "text":
            backend.type_text(pane_id, value)
        else:
            backend.send_keys(pane_id, value)
        time.sleep(0.05)  # let a TUI read one keystroke before the next (not a wait for an outcome)
