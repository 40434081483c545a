"""`mam status --fleet [--json]`: every node seen on the broker, one line each (or a JSON list).

The workspace's own named node answers from its table (op `fleet` on its socket); without one, this
listens to the broker for a few seconds (mam.remote.fleet.listen). It never starts a node or a broker.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from typing import Any

from mam.cli.common import App, echo, echo_json
from mam.node import client
from mam.node.wire import SOCKET
from mam.remote.fleet import LISTEN_S, listen
from mam.view.render import age


def fleet_rows(app: App) -> tuple[list[dict[str, Any]], str]:
    """The rows and where they came from: the local named node's table, else the broker (listened to)."""
    answer = client.ask(str(app.ws.run_dir / SOCKET), "fleet")
    if answer is not None and isinstance(answer.get("fleet"), list):
        return [r for r in answer["fleet"] if isinstance(r, dict)], f"node {answer.get('name') or '?'}'s table"
    return [r.as_dict() for r in listen(app.ws, app.settings)], f"the broker, heard for {LISTEN_S:.0f} s"


def show_fleet(app: App, as_json: bool) -> None:
    rows, source = fleet_rows(app)
    if as_json:
        echo_json(rows)
        return
    now = int(time.time() * 1000)
    for row in rows:
        echo(describe(row, now))
    echo(f"{len(rows)} node{'' if len(rows) == 1 else 's'} seen (from {source})", err=True)


def describe(row: Mapping[str, Any], now_ms: int) -> str:
    """One line for a node: name, host, state and since when, last seen, its sessions and open jobs."""
    state = str(row.get("state", "?")) + (f" ({row['offline_by']})" if row.get("offline_by") else "")
    since = row.get("since_ms")
    when = f"since {time.strftime('%Y-%m-%d %H:%M:%S', time.localtime(since / 1000))}" if since else "since ?"
    seen = f"last seen {age(row.get('last_seen_ms'), now_ms)} ago" if row.get("last_seen_ms") else "last seen -"
    sessions = ", ".join(f"{s.get('name')} {s.get('state')}" for s in row.get("sessions") or []) or "-"
    jobs = " ".join(str(j) for j in row.get("jobs") or []) or "-"
    return f"{row.get('name')}  {row.get('host') or '-'}  {state} {when}  {seen}  sessions: {sessions}  jobs: {jobs}"
