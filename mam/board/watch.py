"""Follow board writes on the broker: this workspace's and those of every workspace sharing the broker
and MAM_TOPIC_PREFIX (read-only copies), each checked against its signature.

A message that fails the check (forged, tampered, on the wrong topic) is never shown as a write: it
is reported to `on_reject` and appended to `.mam/board-rejected.log` (0600). A message older than
what was already shown for its key (a retained copy after a reconnect) is skipped. For this workspace's
own board the registry is the truth: a message older than the registry's version of its key (an old
signed write a broker user published again as retained) is shown as the registry's current entry
instead. Never writes the registry and never starts a broker.
"""

from __future__ import annotations

import json
import queue
import time
from collections.abc import Callable
from dataclasses import dataclass

from mam.board.keys import check_prefix
from mam.board.message import BoardMessage, Keys
from mam.bus.mqtt import MqttClient
from mam.bus.topics import Topics
from mam.errors import DecodeError
from mam.settings import Settings
from mam.store import board as table
from mam.store.common import now_ms
from mam.store.registry import Registry
from mam.util.fs import append_line
from mam.workspace import Workspace

REJECTED_LOG = "board-rejected.log"
LOOK_S = 0.5  # how often the watch looks at `stop()` (Ctrl-C) while no write comes


@dataclass(frozen=True)
class Rejection:
    topic: str
    reason: str
    detail: str


def watch(
    ws: Workspace,
    settings: Settings,
    client: MqttClient,
    *,
    prefix: str = "",
    on_write: Callable[[BoardMessage, bool], None],
    on_reject: Callable[[Rejection], None],
    on_ready: Callable[[str], None] | None = None,
    count: int | None = None,
    timeout_s: float | None = None,
    stop: Callable[[], bool] = lambda: False,
) -> int:
    """Call `on_write(message, remote)` for every new write whose key starts with `prefix`, until
    `count` writes were shown, `timeout_s` passed (None: forever) or `stop()` (looked at every LOOK_S);
    returns how many were shown."""
    check_prefix(prefix)
    keys = Keys(settings)
    topics = Topics.of(settings, ws)
    inbox: queue.Queue[BoardMessage | Rejection] = queue.Queue()

    def received(topic: str, payload: bytes, _retained: bool) -> None:
        if not payload:  # a cleared retained message
            return
        try:
            inbox.put(BoardMessage.open(topic, payload, keys=keys, topics=topics))
        except DecodeError as e:
            inbox.put(Rejection(topic, str(e.reason), str(e)))

    topic = topics.all_board()
    client.subscribe(topic, received)
    if on_ready is not None:
        on_ready(topic)
    seen: dict[tuple[str, str], int] = {}
    shown = 0
    deadline = None if timeout_s is None else time.monotonic() + timeout_s
    registry = Registry.open_existing(ws)
    try:
        while (count is None or shown < count) and not stop():
            wait = None if deadline is None else deadline - time.monotonic()
            if wait is not None and wait <= 0:
                break
            try:
                item = inbox.get(timeout=LOOK_S if wait is None else min(wait, LOOK_S))
            except queue.Empty:
                continue
            if isinstance(item, Rejection):
                _log_rejection(ws, item)
                on_reject(item)
                continue
            if item.board == ws.slug and registry is not None:
                item = _not_older_than_registry(registry, item)
            if not item.key.startswith(prefix) or seen.get((item.board, item.key), 0) >= item.version:
                continue
            seen[(item.board, item.key)] = item.version
            on_write(item, item.board != ws.slug)
            shown += 1
    finally:
        client.unsubscribe(topic)
        if registry is not None:
            registry.close()
    return shown


def _not_older_than_registry(registry: Registry, item: BoardMessage) -> BoardMessage:
    """`item`, or the registry's current entry of its key when that is newer (this workspace's board)."""
    with registry.read() as conn:
        entry = table.find(conn, item.key)
    if entry is None or entry.version <= item.version:
        return item
    return BoardMessage(item.board, entry.key, entry.value, entry.version, entry.writer, entry.ts, entry.deleted)


def _log_rejection(ws: Workspace, rejection: Rejection) -> None:
    ws.state.mkdir(mode=0o700, parents=True, exist_ok=True)
    line = {"ts_ms": now_ms(), "topic": rejection.topic, "reason": rejection.reason, "detail": rejection.detail}
    append_line(ws.state / REJECTED_LOG, json.dumps(line, sort_keys=True, ensure_ascii=False))
