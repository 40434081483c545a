"""The node's watch over its own board on the broker: the retained message of each key stays the current write.

Anyone who may publish on the broker can publish an old signed write of a key again, retained: a watcher
started afterwards would take it for the latest. The workspace's node (a thread of `mam node`) follows
`<prefix>/board/<slug>/#` while the registry holds board keys, and when what the broker holds for a key
is not the registry's current version (older, unverifiable, or cleared), it publishes the current entry
again, retained, under the board lock (as every writer does), at most once per RESTORE_GAP_S per key.
It connects only to a broker that runs already (it never starts the embedded one), and never writes the
registry.
"""

from __future__ import annotations

import logging
import queue
import threading
import time

from mam.board.keys import check_key
from mam.board.message import BoardMessage, Keys, board_secret
from mam.board.store import publish
from mam.bus.connect import open_client
from mam.bus.mqtt import MqttClient
from mam.bus.topics import Topics
from mam.errors import BrokerError, DecodeError, MamError, UsageError
from mam.settings import Settings
from mam.store import board as table
from mam.store.registry import Registry
from mam.util.flock import FileLock
from mam.util.throttle import Throttle
from mam.workspace import Workspace

log = logging.getLogger(__name__)
log.addFilter(Throttle())
LOOK_S = 10.0  # how often it looks for board keys (and a broker) while it follows nothing
RESTORE_GAP_S = 1.0  # one key is published again at most this often (a flood of replays costs one a second)


def keep(ws: Workspace, settings: Settings, stop: threading.Event) -> None:
    """Follow this workspace's board until `stop` is set, restoring each key's retained message."""

    topics = Topics.of(settings, ws)
    mine = topics.board(ws.slug, "")  # `<prefix>/board/<slug>/`: the key follows
    inbox: queue.Queue[tuple[str, bytes]] = queue.Queue(maxsize=10_000)
    client: MqttClient | None = None
    registry: Registry | None = None
    try:
        looked = False
        while client is None:
            if looked and stop.wait(LOOK_S):
                return
            looked = True
            registry = registry or Registry.open_existing(ws)
            if registry is None or not _has_keys(registry):
                continue
            try:
                client = open_client(settings, ws, role="board-keeper", autostart=False, timeout=10)
            except BrokerError:
                continue  # no broker runs: nothing to restore on, and the node never starts one
            client.subscribe(f"{mine}#", lambda topic, payload, _retained: _put(inbox, topic, payload))
        if registry is None:
            return
        keeper = _Keeper(ws, settings, registry, client, topics, mine)
        while not stop.is_set():
            try:  # asleep until a message comes, but for a key waiting out its gap
                topic, payload = inbox.get(timeout=RESTORE_GAP_S if keeper.due else LOOK_S)
            except queue.Empty:
                keeper.restore_due()
                continue
            keeper.look(topic, payload)
    finally:
        if client is not None:
            client.close()
        if registry is not None:
            registry.close()


def _put(inbox: queue.Queue[tuple[str, bytes]], topic: str, payload: bytes) -> None:
    try:
        inbox.put_nowait((topic, payload))
    except queue.Full:
        pass  # a flood: the keys already queued are restored, and the next message of any key is looked at


def _has_keys(registry: Registry) -> bool:
    with registry.read() as conn:
        return table.any_entry(conn)


class _Keeper:
    def __init__(
        self, ws: Workspace, settings: Settings, registry: Registry, client: MqttClient, topics: Topics, mine: str
    ) -> None:
        self.ws, self.settings, self.registry, self.client, self.topics, self.mine = (
            ws,
            settings,
            registry,
            client,
            topics,
            mine,
        )
        self.keys = Keys(settings)
        self.last: dict[str, float] = {}  # key -> when it was last published again
        self.due: set[str] = set()  # keys to publish again once their gap has passed

    def look(self, topic: str, payload: bytes) -> None:
        """One message on this board's topics: publish its key's current entry again unless it is that."""
        key = topic[len(self.mine) :]
        try:
            check_key(key)
        except UsageError:
            return
        with self.registry.read() as conn:
            entry = table.find(conn, key)
        if entry is None:
            return  # not a key of this board's registry: nothing to restore it to
        try:
            if (
                payload
                and BoardMessage.open(topic, payload, keys=self.keys, topics=self.topics).version >= entry.version
            ):
                return
        except DecodeError:
            pass  # unverifiable: a watcher would reject it and see no retained copy at all
        self.due.add(key)
        self.restore_due()

    def restore_due(self) -> None:
        now = time.monotonic()
        for key in [k for k in self.due if now - self.last.get(k, 0.0) >= RESTORE_GAP_S]:
            self.due.discard(key)
            self.last[key] = now
            self._restore(key)

    def _restore(self, key: str) -> None:
        entry = None
        try:
            secret = board_secret(self.settings, self.ws)
            origin = "" if self.settings.dispatch_secret else str(self.ws.root)
            with FileLock(str(self.ws.lock("board"))):
                with self.registry.read() as conn:
                    entry = table.find(conn, key)
                if entry is None:
                    return
                failed = publish(self.client, self.topics, self.ws, entry, secret, origin)
        except (MamError, OSError) as e:
            failed = str(e)
        if failed or entry is None:
            log.warning("board: could not publish %s again: %s", key, failed or "no longer in the registry")
        else:
            log.warning(
                "board: the broker held an older or unverifiable copy of %s: published v%d again", key, entry.version
            )
