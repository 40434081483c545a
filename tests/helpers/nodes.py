"""Ending the mam nodes a test left running (a node with an enabled routine or a task to wake never ends by itself)."""

from __future__ import annotations

import os
import signal
from pathlib import Path

from mam.util.poll import Timeout, wait_for
from mam.util.proc import cmdline, pid_alive, start_time


def nodes_under(folder: Path) -> list[tuple[int, int]]:
    """(pid, start time) of every node process serving a workspace inside `folder` (its `--workspace` argument)."""
    inside = str(folder) + os.sep
    found = []
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        argv = cmdline(int(entry.name))
        if "--workspace" not in argv or not any("mam.node.server" in a for a in argv[:3]):
            continue
        where = argv[argv.index("--workspace") + 1 :][:1]
        started = start_time(int(entry.name))
        if where and (where[0] + os.sep).startswith(inside) and started is not None:
            found.append((int(entry.name), started))
    return found


def end_nodes_under(folder: Path) -> None:
    """SIGKILL the nodes serving workspaces inside `folder` and wait until they are gone: the test's workspaces are
    thrown away, so no hand-over is owed to anyone."""
    procs = nodes_under(folder)
    for pid, _started in procs:
        try:
            os.kill(pid, signal.SIGKILL)
        except OSError:
            pass  # it ended meanwhile
    try:
        wait_for(lambda: not any(pid_alive(p, s) for p, s in procs), timeout=10, interval=0.02)
    except Timeout:
        raise AssertionError(f"nodes {procs} outlived SIGKILL for 10 s") from None
