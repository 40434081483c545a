"""Crash-safe file writes: temp file, fsync, rename; and private (0600) files."""

from __future__ import annotations

import errno
import json
import os
import threading
from pathlib import Path
from typing import Any


def atomic_write(path: Path, data: bytes, *, mode: int = 0o644, fsync: bool = True) -> None:
    """Replace `path` with `data` so a reader sees the old file or the new one, never a part.

    The temporary file beside it is named for this process and thread (made with O_EXCL, never through a
    link): a job's record is rewritten at each of its transitions, and `tempfile.mkstemp`'s random names
    and the folder made again each time cost more than the write."""
    tmp = path.with_name(f".{path.name}.{os.getpid()}.{threading.get_ident()}.tmp")
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
    try:
        fd = os.open(tmp, flags, mode)
    except FileNotFoundError:  # no folder yet: a private file's is made private (0700)
        path.parent.mkdir(mode=0o777 if mode & 0o077 else 0o700, parents=True, exist_ok=True)
        fd = os.open(tmp, flags, mode)
    except FileExistsError:  # left by a crash of a process that had this pid (and thread id)
        os.unlink(tmp)
        fd = os.open(tmp, flags, mode)
    try:
        os.fchmod(fd, mode)  # whatever the umask
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            if fsync:
                f.flush()
                os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except FileNotFoundError:
            pass
        raise


def atomic_write_json(path: Path, obj: Any, *, mode: int = 0o644, fsync: bool = True) -> None:
    """One line of JSON, keys sorted: without `indent`, json's C encoder writes it (a job's record is
    written at each of its transitions; `jq .` shows one indented)."""
    data = json.dumps(obj, sort_keys=True, ensure_ascii=False).encode("utf-8") + b"\n"
    atomic_write(path, data, mode=mode, fsync=fsync)


def append_line(path: Path, line: str, *, mode: int = 0o600) -> None:
    """Append one line with O_APPEND (one write call), so concurrent appenders never interleave; never
    through a symbolic link (O_NOFOLLOW)."""
    data = (line.rstrip("\n") + "\n").encode("utf-8")
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_NOFOLLOW, mode)
    try:
        os.write(fd, data)
    finally:
        os.close(fd)


_PLAIN = {
    errno.ENOSPC: "disk full",
    errno.EDQUOT: "disk full (quota exceeded)",
    errno.EROFS: "read-only file system",
    errno.EACCES: "permission denied",
    errno.EPERM: "not permitted",
}


def describe_os_error(e: OSError) -> str:
    """One line for a failed file operation: what went wrong in plain words, and on which path."""
    what = _PLAIN.get(e.errno or 0) or e.strerror or str(e)
    where = f": {e.filename}" if e.filename else ""
    return f"{what}{where}" + (f" ({e.strerror})" if e.errno in _PLAIN and e.strerror else "")
