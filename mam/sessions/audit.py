"""The workspace's audit log of acts on sessions that are not jobs (a fork): who asked, when, what.

`.mam/session-audit.jsonl`: one JSON object a line (`ts`, `kind`, `session`, `by`, and the act's own
fields), appended, mode 0600 (a job's acts go to its own audit log, mam.jobs.record).
"""

from __future__ import annotations

import getpass
import json
import os
import socket
import time
from pathlib import Path
from typing import Any

from mam.errors import UsageError
from mam.workspace import Workspace

BY_MAX = 200


def path(ws: Workspace) -> Path:
    return ws.state / "session-audit.jsonl"


def default_by() -> str:
    """Who asked, when `--by` is not given: the user and the host (`user@host`)."""
    try:
        user = getpass.getuser()
    except (KeyError, OSError):
        user = str(os.getuid())
    return f"{user}@{socket.gethostname()}"


def check_by(by: str | None) -> str:
    """`--by`: printable text of at most BY_MAX characters (it is printed on terminals); default_by() if empty."""
    if not by:
        return default_by()
    if len(by) > BY_MAX or not by.isprintable():
        raise UsageError(f"--by must be printable text of at most {BY_MAX} characters")
    return by


def append(ws: Workspace, kind: str, *, session: str, by: str, **fields: Any) -> dict[str, Any]:
    """Append one line; return it."""
    line = {"ts": time.time(), "kind": kind, "session": session, "by": by, **fields}
    fd = os.open(path(ws), os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_NOFOLLOW, 0o600)
    with os.fdopen(fd, "a", encoding="utf-8") as f:
        f.write(json.dumps(line, sort_keys=True, ensure_ascii=False) + "\n")
    return line
