"""An operation of the node protocol run in the calling process: the same Service the node runs, with the
frames handed to the caller directly (MAM_NODE=0, no node to start, or an agent's event with no node).

`run` finds the workspace as any command does (its errors are the caller's: not a workspace, an untrusted
`.mam.env`), builds the Service for it (`daemon=False`: the attempt opens its own broker connection, a
heartbeat is a process of its own) and returns the operation's final frame. What the operation does next
for a `--detach`ed delegation (follow the job to its end) runs in a thread of this process: a long-lived
caller (the MCP server) drives it on; a command that exits leaves the job to whoever looks next.
Interrupted (the signals reach the main thread), an operation leaves its job open and says so (`left`).
A final frame from here says so (`here: true`): routines, say, fire only in a node.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from mam.errors import MamError
from mam.node.service import Reply, Service
from mam.outcomes import Exit
from mam.settings import load_settings
from mam.workspace import find_workspace

_services: dict[tuple[str, tuple[tuple[str, str], ...]], Service] = {}
_lock = threading.Lock()


def run(
    explicit: str | Path | None,
    op: str,
    args: dict[str, Any],
    env: Mapping[str, str],
    on_frame: Callable[[dict[str, Any]], None],
) -> dict[str, Any]:
    """Run `op` here for the workspace `explicit` names (else the one found from this process's folder and
    MAM_WORKSPACE): its final frame; every other frame goes to `on_frame`."""
    try:
        ws = find_workspace(str(explicit) if explicit else None)
        key = (str(ws.root), tuple(sorted(env.items())))
        with _lock:
            service = _services.get(key)
            if service is None:
                service = _services[key] = Service(ws, load_settings(env_file=ws.env_file, environ=env), daemon=False)
        final, then = service.serve(op, args, env, Reply(on_frame))
    except MamError as e:
        return {"error": str(e), "exit": e.exit_code}
    except KeyboardInterrupt:
        return {"error": "interrupted", "exit": Exit.INTERRUPTED}
    if then is not None:
        threading.Thread(target=then, name=f"mam-follow-{op}", daemon=True).start()
    return {**final, "here": True}
