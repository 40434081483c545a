"""Files and folders only this user may use, and Unix socket addresses for long paths: shared by
the node's socket (mam.node) and the wake FIFOs (mam.util.pokefifo), whose lean callers may import
nothing else of mam's."""

from __future__ import annotations

import os
import stat

MAX_PATH = 100  # sun_path holds 108 bytes; a longer path is reached through /proc/self/fd/<folder fd>


def private(st: os.stat_result) -> bool:
    return st.st_uid == os.geteuid() and not stat.S_IMODE(st.st_mode) & 0o077


def check_folder(folder: str) -> str:
    """'' if `folder` is a real folder of this user that nobody else may enter or write, else why not."""
    try:
        st = os.lstat(folder)
    except OSError as e:
        return f"{folder}: {e.strerror}"
    if not stat.S_ISDIR(st.st_mode) or not private(st):
        return f"{folder} is not a private folder of this user (mode {stat.S_IMODE(st.st_mode):04o})"
    return ""


def address(sock_path: str) -> tuple[str, int]:
    """An address for `sock_path` that fits sun_path, and a folder descriptor to close afterwards (-1: none)."""
    if len(os.fsencode(sock_path)) <= MAX_PATH:
        return sock_path, -1
    folder, name = os.path.split(sock_path)
    fd = os.open(folder, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    return f"/proc/self/fd/{fd}/{name}", fd
