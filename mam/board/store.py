"""Read and write the workspace's own board: the registry first, then the signed retained message.

Writers of one workspace take the board lock (`.mam/locks/board.lock`) around commit and publish,
so messages reach the broker in version order and the retained one is always the latest write.
A write whose publish fails is still written (the registry is the truth); the result says so.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any

from mam.board.keys import check_key, check_prefix, check_value
from mam.board.message import BoardMessage, board_secret
from mam.bus.connect import open_client
from mam.bus.mqtt import MqttClient
from mam.bus.topics import Topics
from mam.errors import BoardKeyNotFound, BrokerError, StaleVersion, UsageError
from mam.settings import Settings
from mam.store import board as table
from mam.store.common import now_ms
from mam.store.registry import Registry
from mam.util.flock import FileLock
from mam.workspace import Workspace

log = logging.getLogger(__name__)
PUBLISH_TIMEOUT_S = 5.0


@dataclass(frozen=True)
class Written:
    entry: table.Entry
    published: bool
    detail: str = ""  # why it was not published

    def as_dict(self) -> dict[str, Any]:
        return {**self.entry.as_dict(), "deleted": self.entry.deleted, "published": self.published}


def check_writer(registry: Registry, session: str) -> None:
    """A session's agent may use the board only if the session was created with --board (or may run
    anything: --permissions full). A writer that is no session of this workspace is a person."""
    if not session:
        return
    row = registry.find_session(session)
    if row is not None and not row.board and row.permissions != "full":
        raise UsageError(f"session {session!r} may not use the board (create it with `mam session create ... --board`)")


def get(registry: Registry | None, key: str) -> table.Entry:
    """The key's entry; BoardKeyNotFound if it was never written, is deleted, or there is no registry."""
    check_key(key)
    if registry is None:
        raise BoardKeyNotFound(f"no board key {key!r}", key=key)
    with registry.read() as conn:
        entry = table.find(conn, key)
    if entry is None or entry.deleted:
        raise BoardKeyNotFound(f"no board key {key!r}", key=key)
    return entry


def list_keys(registry: Registry | None, prefix: str = "") -> list[table.Entry]:
    check_prefix(prefix)
    if registry is None:
        return []
    with registry.read() as conn:
        return table.list_live(conn, prefix)


def write(
    ws: Workspace,
    settings: Settings,
    registry: Registry,
    key: str,
    value: str | None,
    *,
    writer: str,
    if_version: int | None = None,
    client: MqttClient | None = None,
) -> Written:
    """Set `key` to `value` (None: delete it) at the next version, then publish it; StaleVersion if
    `if_version` is not the key's current version (nothing written)."""
    check_key(key)
    if value is not None:
        check_value(value)
    if if_version is not None and if_version < 0:
        raise UsageError("--if-version is 0 (the key must not exist) or a version the key has")
    secret = board_secret(settings, ws)
    topics = Topics.of(settings, ws)
    own, detail = client is None, ""
    if client is None:
        try:
            client = open_client(settings, ws, role="board")
        except BrokerError as e:
            detail = str(e)
    try:
        with FileLock(str(ws.lock("board"))):
            with registry.write() as conn:
                old = table.find(conn, key)
                if value is None and (old is None or old.deleted):
                    raise BoardKeyNotFound(f"no board key {key!r}", key=key)
                try:
                    entry = table.write(conn, key, value, writer=writer, ts=now_ms(), if_version=if_version)
                except table.VersionMismatch as e:
                    raise StaleVersion(
                        f"board key {key!r} is at version {e.current}, not {if_version}: nothing written", key=key
                    ) from e
            if client is not None:
                origin = "" if settings.dispatch_secret else str(ws.root)  # where a same-user watcher finds the key
                detail = publish(client, topics, ws, entry, secret, origin)
    finally:
        if own and client is not None:
            client.close()
    return Written(entry, published=not detail, detail=detail)


def publish(client: MqttClient, topics: Topics, ws: Workspace, entry: table.Entry, secret: str, origin: str) -> str:
    """Publish `entry` as its key's retained, signed message (the caller holds the board lock); '' or why not."""
    msg = BoardMessage(ws.slug, entry.key, entry.value, entry.version, entry.writer, entry.ts, entry.deleted, origin)
    try:
        client.publish(
            topics.board(ws.slug, entry.key), msg.encode(secret), qos=1, retain=True, timeout=PUBLISH_TIMEOUT_S
        )
    except BrokerError as e:
        log.debug("board write %s v%d not published: %s", entry.key, entry.version, e)
        return str(e)
    return ""
