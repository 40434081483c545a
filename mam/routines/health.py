"""Whether the routines' webhook URL reaches them now: what `mam routine list`, `mam status` and `mam doctor` say.

The node never moves the webhook to another port (senders keep the URL they were given): when another
program holds it, the node records why in the registry's `meta` row DOWN_KEY until it has the port again
(mam.routines.webhook). Light on purpose: `mam status` imports it.
"""

from __future__ import annotations

import json
from typing import Any

from mam.store import routines as table
from mam.store.registry import Registry

DOWN_KEY = "routine_webhook_down"  # JSON {port, since, why} while the node cannot serve the recorded port


def down(registry: Registry) -> dict[str, Any] | None:
    """What the node recorded about the port it cannot serve ({port, since, why}), or None."""
    with registry.read() as conn:
        value = table.meta(conn, DOWN_KEY)
    try:
        data = json.loads(value) if value else None
    except ValueError:
        return None
    return data if isinstance(data, dict) else None


def webhook_problem(registry: Registry) -> str:
    """Why the routines' webhook URL does not reach them ('' when nothing says so, or no routine has a webhook):
    the last node to try could not have its port (the next node tries again at its start)."""
    with registry.read() as conn:
        if not any(r.secret for r in table.list_all(conn)):
            return ""
    problem = down(registry)
    return str(problem.get("why", "")) if problem else ""
