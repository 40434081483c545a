"""The fleet view: every node seen on the broker, folded from the presence messages runners publish.

A named node (`mam node --name NAME`, `mam runner`) announces itself on
`<runners prefix>/runners/NAME/presence` (retained, signed with MAM_DISPATCH_SECRET, its last will
`offline`) when it connects, on every reconnect and every 2 s (mam.remote.runner). `presence()`
builds that message; `FleetTable` folds what arrives into one row per node:

- `online` from a node's current life (the body's `since`: when that process started) makes it
  online; a message of an earlier life (a late will of a process since restarted) changes nothing;
- `offline` with `by: goodbye` (the node stopped) or `by: will` (the broker published its last will:
  the connection was lost) makes it offline;
- an online node not heard for `SILENCE_S` (several missed re-announces) reads offline, `silence`:
  a node cut off from a broker that has not yet fired its will, or a retained `online` left behind.

A named node keeps a table (its runner subscribes to every presence) and answers the `fleet` op on
its socket; without one, `listen` hears the broker for LISTEN_S (longer than two re-announces, so a
live node is heard even when a clustered broker answers without the retained copy). Looking never
starts a node or a broker.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass, field, replace
from typing import Any

from mam.bus.connect import open_client
from mam.bus.envelope import Envelope
from mam.bus.topics import Topics
from mam.errors import DecodeError, UsageError
from mam.settings import MAKE_SECRET, Settings
from mam.store.sessions import LIVE
from mam.workspace import Workspace

SILENCE_S = 10.0  # an online node not heard for this long reads offline (5 missed 2 s re-announces)
LISTEN_S = 4.0  # `mam status --fleet` without a named node: how long it listens to the broker
MAX_LISTED = 200  # sessions and open jobs a presence lists at most: far under the 64 KiB cap of a message
BY = ("goodbye", "will", "silence")


def presence(
    kind: str,
    *,
    name: str,
    secret: str,
    since_ms: int,
    host: str,
    pid: int,
    workspace: str,
    sessions: Iterable[tuple[str, str]],
    jobs: Iterable[str],
    by: str = "",
    ts: int | None = None,
) -> bytes:
    """A runner's signed presence message: `kind` online / offline; `by` goodbye / will when offline.
    `sessions` are (name, registry status) pairs; `sessions` in the body keeps only the running ones'
    names (what an origin checks before dispatching), `session_states` has them all with their state."""
    listed = list(sessions)[:MAX_LISTED]
    body: dict[str, Any] = {
        "runner": name,
        "host": host,
        "pid": pid,
        "workspace": workspace,
        "since": since_ms,
        "sessions": [n for n, state in listed if state in LIVE],
        "session_states": [{"name": n, "state": state} for n, state in listed],
        "jobs": list(jobs)[:MAX_LISTED],
    }
    if kind == "offline":
        body["by"] = by or "goodbye"
    now = int(time.time() * 1000) if ts is None else ts
    env = Envelope(kind="presence", job=name, seq=0, type=kind, sender="runner", ts=now, body=body)
    return env.signed(secret).encode()


@dataclass
class FleetRow:
    """One node as the table knows it (`as_dict` is a row of `mam status --fleet --json`)."""

    name: str
    host: str = ""
    state: str = "offline"  # online / offline
    since_ms: int | None = None  # when the current state began (None: not known, e.g. a will read retained)
    last_seen_ms: int | None = None  # when it was last heard saying it is online (or saying goodbye)
    sessions: list[dict[str, str]] = field(default_factory=list)  # [{name, state}]
    jobs: list[str] = field(default_factory=list)  # its workspace's open jobs
    offline_by: str | None = None  # goodbye / will / silence; None while online
    pid: int | None = None
    workspace: str = ""
    life: int | None = None  # the body's `since`: which process of that name this is
    stamp: int = 0  # the newest `ts` applied from that life (an older message is stale)

    def as_dict(self) -> dict[str, Any]:
        row = asdict(self)
        del row["life"], row["stamp"]
        return row


def _sessions(body: Mapping[str, Any]) -> list[dict[str, str]]:
    states = body.get("session_states")
    if isinstance(states, list):
        return [
            {"name": str(s.get("name", "")), "state": str(s.get("state", ""))}
            for s in states[:MAX_LISTED]
            if isinstance(s, dict)
        ]
    names = body.get("sessions")  # a runner of an older mam: the names of its running sessions only
    return [{"name": str(n), "state": "running"} for n in names[:MAX_LISTED]] if isinstance(names, list) else []


def _jobs(body: Mapping[str, Any]) -> list[str]:
    jobs = body.get("jobs")
    return [str(j) for j in jobs[:MAX_LISTED]] if isinstance(jobs, list) else []


def _int(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


class FleetTable:
    """Presence messages in, one row per node out. Thread-safe: fed from a broker's network thread."""

    def __init__(self, secret: str, *, silence_s: float = SILENCE_S) -> None:
        self.secret = secret
        self.silence_ms = int(silence_s * 1000)
        self._rows: dict[str, FleetRow] = {}
        self._lock = threading.Lock()

    def feed(self, payload: bytes, *, retained: bool, now_ms: int | None = None, topic: str = "") -> bool:
        """Fold one message from a presence topic; False when it was not a validly signed presence, or arrived on
        the topic of another node than the one it names (a broker user's replay)."""
        if not payload:
            return False  # a cleared retained message
        try:
            env = Envelope.decode(payload)
        except DecodeError:
            return False
        if env.kind != "presence" or env.type not in ("online", "offline") or not env.verify(self.secret):
            return False
        if topic and not topic.endswith(f"/runners/{env.job}/presence"):
            return False
        self.fold(env, retained=retained, now_ms=_now() if now_ms is None else now_ms)
        return True

    def on_message(self, topic: str, payload: bytes, retained: bool) -> None:
        """An MQTT handler (mam.bus.mqtt) for the presence topics."""
        self.feed(payload, retained=retained, topic=topic)

    def fold(self, env: Envelope, *, retained: bool, now_ms: int) -> None:
        body = env.body
        life = _int(body.get("since"))
        # When it was heard: now, for a live message; for a retained copy its own time (never later than now).
        heard = min(now_ms, env.ts) if retained else now_ms
        with self._lock:
            row = self._rows.get(env.job)
            if row is not None and life is not None and row.life is not None:
                if life < row.life:
                    return  # a message of an earlier life of that name (say, a will fired after a restart)
                if life == row.life and env.ts < row.stamp and body.get("by") != "will":
                    return  # older than what this life said since (a will's ts is its connection's, older)
            new = row if row is not None and row.life == life else FleetRow(name=env.job)
            # Offline already (it said so, or has not been heard for SILENCE_S): since when, if known.
            gone: int | None = None
            down = new is row and (row.state == "offline" or now_ms - (row.last_seen_ms or 0) > self.silence_ms)
            if down and row is not None:
                gone = row.since_ms if row.state == "offline" else row.last_seen_ms
            new.life = life
            new.host = str(body.get("host", new.host))
            new.pid = _int(body.get("pid"))
            new.workspace = str(body.get("workspace", new.workspace))
            if env.type == "online":
                # since: its start when first seen; when it comes back, the moment it was heard again
                new.since_ms = (
                    (life if life is not None else env.ts) if new is not row else heard if down else row.since_ms
                )
                new.state, new.offline_by = "online", None
                new.last_seen_ms = max(new.last_seen_ms or 0, heard)
                new.stamp = max(new.stamp, env.ts)
                new.sessions, new.jobs = _sessions(body), _jobs(body)
            else:
                self._offline(new, env, heard, retained, down=down, gone=gone, fresh=new is not row)
            self._rows[env.job] = new

    @staticmethod
    def _offline(
        row: FleetRow, env: Envelope, heard: int, retained: bool, *, down: bool, gone: int | None, fresh: bool
    ) -> None:
        by = str(env.body.get("by") or "goodbye")
        by = by if by in BY else "goodbye"
        since: int | None
        if by == "goodbye":  # its own last word, sent when it stopped, with what it had then
            since = env.ts
            row.last_seen_ms = max(row.last_seen_ms or 0, heard)
            row.stamp = max(row.stamp, env.ts)
            row.sessions, row.jobs = _sessions(env.body), _jobs(env.body)
        else:  # the broker's, built when the node connected: its lists are that old, keep what was seen since
            since = heard if not retained else row.last_seen_ms if not fresh else None
            if fresh:
                row.sessions, row.jobs = _sessions(env.body), _jobs(env.body)
        if down and gone is not None:
            since = gone  # offline already: it stays offline since then
        row.state, row.offline_by, row.since_ms = "offline", by, since

    def rows(self, now_ms: int | None = None) -> list[FleetRow]:
        """Every node seen, by name; an online one not heard for SILENCE_S reads offline (`silence`)."""
        now = _now() if now_ms is None else now_ms
        with self._lock:
            rows = [replace(r, sessions=list(r.sessions), jobs=list(r.jobs)) for r in self._rows.values()]
        for r in rows:
            if r.state == "online" and now - (r.last_seen_ms or 0) > self.silence_ms:
                r.state, r.offline_by, r.since_ms = "offline", "silence", r.last_seen_ms
        return sorted(rows, key=lambda r: r.name)


def _now() -> int:
    return int(time.time() * 1000)


# -- the view: listening to the broker ----------------------------------------------------------


def listen(ws: Workspace, settings: Settings, listen_s: float = LISTEN_S) -> list[FleetRow]:
    """Subscribe to every presence for `listen_s` and fold what comes (no node, no autostart).
    UsageError without MAM_DISPATCH_SECRET (presence is signed with it); BrokerError when no broker answers."""
    secret = settings.dispatch_secret
    if not secret:
        raise UsageError(
            f"the fleet view needs MAM_DISPATCH_SECRET (every node signs its presence with it): {MAKE_SECRET}"
        )
    table = FleetTable(secret)
    with open_client(settings, ws, role="fleet", autostart=False, timeout=5) as bus:
        bus.subscribe(Topics.of(settings, ws).all_presence(), table.on_message)
        time.sleep(listen_s)  # a window to hear every node, not a wait for one thing
    return table.rows()
