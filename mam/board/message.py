"""A board write on the wire: a signed envelope of kind `board`, and the keys that sign and check it.

The key is MAM_DISPATCH_SECRET when it is set: the secret workspaces sharing a broker already share
for remote dispatch, so a watcher in any of them can check a write of any other. Without it, a
workspace signs with a random key of its own (`.mam/board-secret`, 0600, made on first use), and
names its folder in the message (`origin`): a watcher run by the same user on the same host reads
that key from there (only if the file and its folder are that user's and no one else may write
them, and the folder's slug is the message's board), so the workspaces of one user need no shared
setting; any other receiver rejects the write as unverifiable. The key never travels; see
MESSAGING.md ("Board messages").
"""

from __future__ import annotations

import os
import secrets
import stat
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from mam.board.keys import check_key, check_value
from mam.bus.envelope import MAX_BOARD_BYTES, Envelope
from mam.bus.topics import Topics, segment
from mam.errors import ConfigError, DecodeError, UsageError
from mam.outcomes import Rejected
from mam.settings import Settings
from mam.util.fs import atomic_write
from mam.workspace import STATE_DIR, Workspace, workspace_slug

SECRET_FILE = "board-secret"
SET, DELETE = "set", "delete"


def board_secret(settings: Settings, ws: Workspace) -> str:
    """The key this workspace signs its board messages with (never printed or logged)."""
    if settings.dispatch_secret:
        return settings.dispatch_secret
    path = ws.state / SECRET_FILE
    if not path.exists():
        ws.state.mkdir(mode=0o700, parents=True, exist_ok=True)
        atomic_write(path, (secrets.token_hex(32) + "\n").encode("ascii"), mode=0o600)
    key = _own_key(path)
    if key is None:
        raise ConfigError(
            f"{path} must be a regular file of yours, readable by you only (chmod 600 {path}), holding a key "
            "(delete it and a new one is made)"
        )
    return key


def _own_key(path: Path) -> str | None:
    """The key in `path` if it is a regular file of this user that no one else may read or write
    (not through a symbolic link), in a folder no one else may write; else None."""
    try:
        folder = os.lstat(path.parent)
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW)
    except OSError:
        return None
    try:
        info = os.fstat(fd)
        if (
            not stat.S_ISREG(info.st_mode)
            or info.st_uid != os.getuid()
            or info.st_mode & 0o077
            or not stat.S_ISDIR(folder.st_mode)
            or folder.st_uid != os.getuid()
            or folder.st_mode & 0o022
            or info.st_size > 256
        ):
            return None
        key = os.read(fd, 256).decode("ascii", "replace").strip()
    finally:
        os.close(fd)
    return key if len(key) >= 32 else None


class Keys:
    """What a receiver checks board messages with: MAM_DISPATCH_SECRET, and the key of the writing
    workspace when that is a workspace of this user on this host (read once per workspace)."""

    def __init__(self, settings: Settings) -> None:
        self.shared = settings.dispatch_secret
        self._origins: dict[str, str | None] = {}

    def for_origin(self, origin: str, board: str) -> list[str]:
        keys = [self.shared] if self.shared else []
        root = Path(origin)
        # Checked on every message, cached or not: a folder's key signs for that folder's board only.
        if not origin or not root.is_absolute() or str(root) != os.path.normpath(origin):
            return keys
        if workspace_slug(root) != board:
            return keys
        if origin not in self._origins and len(self._origins) < 1024:
            self._origins[origin] = _own_key(root / STATE_DIR / SECRET_FILE)
        own = self._origins.get(origin)
        return keys + ([own] if own else [])


@dataclass(frozen=True)
class BoardMessage:
    board: str  # the workspace whose board holds the key (its slug)
    key: str
    value: str
    version: int
    writer: str
    ts: int
    deleted: bool = False
    origin: str = ""  # the writing workspace's folder, when it signs with a key of its own

    def encode(self, secret: str) -> bytes:
        body: dict[str, Any] = {
            "board": self.board,
            "key": self.key,
            "value": self.value,
            "version": self.version,
            "writer": self.writer,
            "ts": self.ts,
        }
        if self.origin:
            body["origin"] = self.origin
        env = Envelope(
            kind="board",
            job=self.board,
            seq=self.version,
            type=DELETE if self.deleted else SET,
            sender=self.writer,
            ts=self.ts,
            body=body,
        )
        return env.signed(secret).encode()

    def as_dict(self) -> dict[str, Any]:
        return {
            "board": self.board,
            "key": self.key,
            "value": self.value,
            "version": self.version,
            "writer": self.writer,
            "ts": self.ts,
            "deleted": self.deleted,
        }

    @classmethod
    def open(cls, topic: str, raw: bytes, *, keys: Keys, topics: Topics) -> BoardMessage:
        """Decode and check a message received on `topic`; raise DecodeError(reason=...) for a forged,
        tampered or misplaced one. Nothing in it is used before its signature checks."""
        env = Envelope.decode(raw, max_bytes=MAX_BOARD_BYTES)
        if env.kind != "board" or env.type not in (SET, DELETE):
            raise DecodeError(f"not a board write ({env.kind}/{env.type})", reason=Rejected.WRONG_KIND)
        b = env.body
        try:
            msg = cls(
                board=segment(str(b["board"]), "board name"),
                key=check_key(b["key"]),
                value=check_value(b["value"]),
                version=int(b["version"]),
                writer=str(b["writer"]),
                ts=int(b["ts"]),
                deleted=env.type == DELETE,
                origin=str(b.get("origin", "")),
            )
        except (KeyError, TypeError, ValueError, UsageError) as e:
            raise DecodeError(f"board message body is malformed: {e}", reason=Rejected.BAD_SHAPE) from e
        if not any(env.verify(key) for key in keys.for_origin(msg.origin, msg.board)):
            raise DecodeError("board message signature does not match the board key", reason=Rejected.BAD_SIGNATURE)
        # A signed write replayed on another key's topic is still a forgery of that key.
        if topic != topics.board(msg.board, msg.key) or env.job != msg.board or env.seq != msg.version:
            raise DecodeError(f"board message for {msg.board}/{msg.key} arrived on {topic}", reason=Rejected.WRONG_JOB)
        return msg
