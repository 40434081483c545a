"""The embedded broker's one login: username `mam` and a random password kept in
`.mam/broker/password` (mode 0600), made once per workspace.

Every mam process of the workspace reads it to connect; a person's own MQTT client can too
(`mam broker status --json` names the file). Other local users cannot read it, so they cannot
connect. Never logged, never printed.
"""

from __future__ import annotations

import os
import secrets
import stat
from dataclasses import dataclass
from pathlib import Path

from mam.errors import BrokerError
from mam.workspace import Workspace

USERNAME = "mam"
PASSWORD_FILE = "password"


@dataclass(frozen=True)
class Credentials:
    username: str
    password: str
    path: Path

    def __repr__(self) -> str:  # never show the password
        return f"Credentials(username={self.username!r}, path={str(self.path)!r})"


def password_path(ws: Workspace) -> Path:
    return ws.broker_dir / PASSWORD_FILE


def read_password(path: Path) -> str:
    """The password in `path`, or "" when the file does not exist."""
    try:
        with open(path, encoding="utf-8") as f:
            return f.read().strip()
    except FileNotFoundError:
        return ""
    except (OSError, UnicodeDecodeError) as e:
        raise BrokerError(f"cannot read the embedded broker's password file {path}: {e.__class__.__name__}") from e


def load(ws: Workspace) -> Credentials | None:
    """The workspace's credentials, or None before the embedded broker first started."""
    path = password_path(ws)
    password = read_password(path)
    return Credentials(USERNAME, password, path) if password else None


def ensure(ws: Workspace) -> tuple[Credentials, bool]:
    """The workspace's credentials and whether they were just made (0600, exclusively); a looser
    file is tightened."""
    path = password_path(ws)
    path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    created = False
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except FileExistsError:
        if stat.S_IMODE(path.stat().st_mode) & 0o077:
            os.chmod(path, 0o600)
    else:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(secrets.token_urlsafe(32) + "\n")
        created = True
    found = load(ws)
    if found is None:
        raise BrokerError(f"the embedded broker's password file {path} is empty; remove it and start the broker again")
    return found, created
