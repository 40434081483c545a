"""Whose files mam may act on: only its own user's, and only ones nobody else can write.

It owns the owner and mode checks of `.mam.env`, `.mam/` and the processes named by pid
files; it decides nothing about what those files mean.
"""

from __future__ import annotations

import os
import pwd
import stat
from pathlib import Path

from mam.errors import UntrustedFile

# Group or others may write: someone else could change what mam reads or runs.
_FOREIGN_WRITE = stat.S_IWGRP | stat.S_IWOTH


def user_name(uid: int) -> str:
    """`name (uid N)`, or `uid N` when the uid has no account."""
    try:
        return f"{pwd.getpwuid(uid).pw_name} (uid {uid})"
    except KeyError:
        return f"uid {uid}"


def me() -> int:
    return os.geteuid()


def check_path(path: Path, *, what: str) -> os.stat_result | None:
    """Refuse `path` (raise UntrustedFile) if another user owns it or group/others may write it.

    A symbolic link is judged by the link and by what it points at. Returns the stat of the
    target, or None if nothing is there.
    """
    try:
        link = os.lstat(path)
    except FileNotFoundError:
        return None
    except OSError as e:
        raise UntrustedFile(f"cannot inspect {what} {path}: {e.strerror}", path=str(path)) from e
    try:
        target = os.stat(path)
    except OSError:
        target = link  # a dangling link: judge the link itself
    for st in (link, target):
        if st.st_uid != me():
            raise UntrustedFile(
                f"refusing {what} {path}: it is owned by {user_name(st.st_uid)}, not by you ({user_name(me())}); "
                "mam only reads files its own user owns",
                path=str(path),
                owner=st.st_uid,
            )
    if not stat.S_ISLNK(target.st_mode) and target.st_mode & _FOREIGN_WRITE:
        mode = stat.S_IMODE(target.st_mode)
        raise UntrustedFile(
            f"refusing {what} {path}: mode {mode:04o} lets group or others write it; fix with `chmod go-w {path}`",
            path=str(path),
            mode=mode,
        )
    return target


def check_state_dir(path: Path) -> bool:
    """Check `.mam/` (see check_path) and tighten it to 0700 if others may read or enter it; True if it exists."""
    st = check_path(path, what="state folder")
    if st is None:
        return False
    if not stat.S_ISDIR(st.st_mode):
        raise UntrustedFile(f"refusing state folder {path}: it is not a folder", path=str(path))
    if stat.S_IMODE(st.st_mode) & 0o077:
        try:
            os.chmod(path, 0o700)
        except OSError as e:
            raise UntrustedFile(f"cannot make {path} private (chmod 0700): {e.strerror}", path=str(path)) from e
    return True


def process_owner(pid: int) -> int | None:
    """The real uid a live process runs as (from /proc), or None if it is gone."""
    try:
        return os.stat(f"/proc/{pid}").st_uid
    except OSError:
        return None


def check_process(pid: int, *, what: str, pid_file: Path) -> None:
    """Refuse a pid file whose live process belongs to another user (pid reuse, or a planted process)."""
    owner = process_owner(pid)
    if owner is not None and owner != me():
        raise UntrustedFile(
            f"refusing {what} {pid_file}: its pid {pid} belongs to {user_name(owner)}, not to you ({user_name(me())}); "
            "stop that process or remove the file",
            path=str(pid_file),
            owner=owner,
        )
