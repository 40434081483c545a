"""A bearer token kept in the workspace: from a setting, else from `.mam/<file>` (0600), made on first use.

`mam mcp --http` and `mam web` each keep theirs this way. The token itself is never printed or logged.
"""

from __future__ import annotations

import os
import secrets
import stat

from mam.errors import ConfigError
from mam.util.fs import atomic_write
from mam.workspace import Workspace


def workspace_token(ws: Workspace, *, given: str, setting: str, file_name: str) -> tuple[str, str]:
    """(token, where it came from): `given` (the value of `setting`) when set, else the file's token."""
    given = given.strip()
    if given:
        if len(given) < 16:
            raise ConfigError(f"{setting} is too short to be a secret: give at least 16 characters, or unset it")
        return given, setting
    path = ws.state / file_name
    if not path.exists():
        ws.state.mkdir(mode=0o700, parents=True, exist_ok=True)
        atomic_write(path, (secrets.token_urlsafe(32) + "\n").encode("ascii"), mode=0o600)
    info = path.lstat()
    if not stat.S_ISREG(info.st_mode) or info.st_uid != os.getuid() or info.st_mode & 0o077:
        raise ConfigError(f"{path} must be a regular file of yours readable by you only (chmod 600 {path})")
    token = path.read_text(encoding="ascii").strip()
    if len(token) < 16:
        raise ConfigError(f"{path} holds no usable token (delete it and a new one is made)")
    return token, str(path)
