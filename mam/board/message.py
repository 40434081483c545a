"""A board write on the wire: a signed envelope of kind `board`, and the key that signs it.

The key is MAM_DISPATCH_SECRET when it is set: the secret workspaces sharing a broker already share
for remote dispatch, so a watcher in any of them can check a write of any other. Without it, a
workspace signs with a random key of its own (`.mam/board-secret`, 0600, made on first use): its
own watchers check its writes, and another workspace cannot (it rejects them, as it rejects any
write it cannot verify). The key never travels; see MESSAGING.md ("Board messages").
"""

from __future__ import annotations

import os
import secrets
import stat
from dataclasses import dataclass
from typing import Any

from mam.board.keys import check_key, check_value
from mam.bus.envelope import MAX_BOARD_BYTES, Envelope
from mam.bus.topics import Topics, segment
from mam.errors import ConfigError, DecodeError, UsageError
from mam.jobs.outcomes import Rejected
from mam.settings import Settings
from mam.util.fs import atomic_write
from mam.workspace import Workspace

SECRET_FILE = "board-secret"
SET, DELETE = "set", "delete"


def board_secret(settings: Settings, ws: Workspace) -> str:
    """The key board messages are signed and checked with (never printed or logged)."""
    if settings.dispatch_secret:
        return settings.dispatch_secret
    path = ws.state / SECRET_FILE
    if not path.exists():
        ws.state.mkdir(mode=0o700, parents=True, exist_ok=True)
        atomic_write(path, (secrets.token_hex(32) + "\n").encode("ascii"), mode=0o600)
    info = path.lstat()
    if not stat.S_ISREG(info.st_mode) or info.st_uid != os.getuid() or info.st_mode & 0o077:
        raise ConfigError(f"{path} must be a regular file of yours readable by you only (chmod 600 {path})")
    key = path.read_text(encoding="ascii").strip()
    if len(key) < 32:
        raise ConfigError(f"{path} holds no usable key (delete it and a new one is made)")
    return key


@dataclass(frozen=True)
class BoardMessage:
    board: str  # the workspace whose board holds the key (its slug)
    key: str
    value: str
    version: int
    writer: str
    ts: int
    deleted: bool = False

    def encode(self, secret: str) -> bytes:
        body: dict[str, Any] = {
            "board": self.board,
            "key": self.key,
            "value": self.value,
            "version": self.version,
            "writer": self.writer,
            "ts": self.ts,
        }
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
    def open(cls, topic: str, raw: bytes, *, secret: str, topics: Topics) -> BoardMessage:
        """Decode and check a message received on `topic`; raise DecodeError(reason=...) for a forged,
        tampered or misplaced one."""
        env = Envelope.decode(raw, max_bytes=MAX_BOARD_BYTES)
        if env.kind != "board" or env.type not in (SET, DELETE):
            raise DecodeError(f"not a board write ({env.kind}/{env.type})", reason=Rejected.WRONG_KIND)
        if not env.verify(secret):
            raise DecodeError("board message signature does not match the board key", reason=Rejected.BAD_SIGNATURE)
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
            )
        except (KeyError, TypeError, ValueError, UsageError) as e:
            raise DecodeError(f"board message body is malformed: {e}", reason=Rejected.BAD_SHAPE) from e
        # A signed write replayed on another key's topic is still a forgery of that key.
        if topic != topics.board(msg.board, msg.key) or env.job != msg.board or env.seq != msg.version:
            raise DecodeError(f"board message for {msg.board}/{msg.key} arrived on {topic}", reason=Rejected.WRONG_JOB)
        return msg
