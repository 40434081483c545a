"""After a tool call's PreToolUse: is the agent now waiting on a permission prompt?

Claude Code 2.1.332 in its default auto mode sends no PermissionRequest when auto mode cannot
check an action and asks a person instead; its Notification (`agent_needs_input`) comes ~7 s
later. So `mam hook` forks this watcher (detached: the agent never waits for it): for up to
WATCH_S it looks at the pane while the session's last hook is still that PreToolUse, and when
the adapter sees a permission prompt there it records `waiting` for that tool at once. It types
nothing.
"""

from __future__ import annotations

import os
import time

from mam.agents import get_adapter
from mam.hooks import session_state
from mam.hooks.translate import Activity
from mam.workspace import Workspace

WATCH_S = 3.0
STEP_S = 0.2


def detach() -> bool:
    """Fork; True in the child (stdio on /dev/null, own session), False in the parent."""
    if os.fork() != 0:
        return False
    os.setsid()
    null = os.open(os.devnull, os.O_RDWR)
    for fd in (0, 1, 2):
        os.dup2(null, fd)
    os.closerange(3, 256)  # nothing of the agent's pipes may stay open here: it would wait on them
    return True


def watch(ws: Workspace, session: str, act: Activity, seen_at: float) -> Activity | None:
    """The waiting activity if a prompt shows while `act` is still the session's last hook; else None."""
    from mam.panes import open_backend
    from mam.settings import load_settings
    from mam.store.registry import Registry

    registry = Registry.open_existing(ws)
    if registry is None:
        return None
    try:
        row = registry.find_session(session)
    finally:
        registry.close()
    if row is None or not row.pane_id:
        return None
    adapter = get_adapter(row.agent)
    backend = open_backend(
        row.backend, row.server, settings=load_settings(env_file=ws.env_file), ws=ws, socket=row.socket
    )
    until = time.monotonic() + WATCH_S
    while time.monotonic() < until:
        time.sleep(STEP_S)
        if session_state.read(ws, session).get("at") != seen_at:
            return None  # the tool ran (PostToolUse) or another hook came: no prompt held it up
        dialog = adapter.dialog(backend.capture(row.pane_id, lines=60))
        if dialog is not None and dialog.kind == "prompt":
            return Activity("waiting", act.source, tool=act.tool, message=f"permission prompt ({dialog.marker})")
    return None
