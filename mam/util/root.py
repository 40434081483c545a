"""Find the workspace's root the way mam.workspace.find_workspace does, for the lean entry points
(the thin client, mam.node.client) that must not import pathlib or the settings; and judge
whether its files are plainly this user's (anything less is for mam.util.trust to judge, on the
full path)."""

from __future__ import annotations

import os
import stat

STATE_DIR, ENV_FILE = ".mam", ".mam.env"  # mirrors of mam.workspace (checked equal by a test)


def find_root(explicit: str | bool | None) -> str | None:
    """The workspace's root as mam.workspace.find_workspace finds it, if its files are plainly trusted."""
    chosen = explicit if isinstance(explicit, str) else ""
    chosen = chosen or os.environ.get("MAM_WORKSPACE") or ""
    if chosen:
        root = os.path.expanduser(chosen)
        if not os.path.isdir(root):
            return None
        root = os.path.realpath(root)
        return root if plainly_trusted(root) else None
    folder = os.path.realpath(os.getcwd())
    while True:
        state, env = os.path.join(folder, STATE_DIR), os.path.join(folder, ENV_FILE)
        if os.path.isdir(state) or os.path.islink(state) or (os.path.lexists(env) and not os.path.isdir(env)):
            return folder if plainly_trusted(folder) else None
        parent = os.path.dirname(folder)
        if parent == folder:
            return None
        folder = parent


def plainly_trusted(root: str) -> bool:
    """`.mam/` a real 0700 folder of this user; `.mam.env` absent or a regular file of this user that
    nobody else may write. Anything else is for mam.util.trust to judge (and to refuse or tighten)."""
    me = os.geteuid()
    try:
        st = os.lstat(os.path.join(root, STATE_DIR))
    except OSError:
        return False
    if not stat.S_ISDIR(st.st_mode) or st.st_uid != me or stat.S_IMODE(st.st_mode) & 0o077:
        return False
    try:
        st = os.lstat(os.path.join(root, ENV_FILE))
    except FileNotFoundError:
        return True
    except OSError:
        return False
    return stat.S_ISREG(st.st_mode) and st.st_uid == me and not st.st_mode & (stat.S_IWGRP | stat.S_IWOTH)
