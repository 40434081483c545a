"""Forking a detached helper from a short-lived command (the heartbeater, from `mam event started`).

It owns the double fork, the new session, the descriptors the helper keeps and its pid file; what
the helper does is the caller's `body`, called in the grandchild only. Imports nothing slow, so
`mam event started --heartbeat N` pays for the heartbeater's own modules in the helper, not in the
agent's command.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable

from mam.util.proc import start_time

PIDFILE = "heartbeat.pid"
# Why a heartbeater stops when the agent's process was never visible to it (a sandbox with its
# own pid namespace, as codex's): it keeps its pid file, so the wrapper outside starts another.
AGENT_UNSEEN = "agent_unseen"


def detached(
    folder: str,
    agent_pid: int,
    body: Callable[[int | None], None],
    *,
    log_name: str,
    done_at_once: Callable[[int | None], bool] | None = None,
) -> int:
    """Run `body(agent_start)` in a detached grandchild of this process, its output to `folder/log_name`.

    `body` must end the process (os._exit) and never return to the caller's code. `done_at_once`,
    if given, runs in the grandchild before this call returns: True ends the helper there (it has
    said why in its log), so the caller's exit cannot outrun it (a sandbox kills what a tool
    command leaves behind once it ends). The caller must hold no threads and no open connections
    (fork copies only the calling thread). Returns the helper's pid, which the helper recorded with
    its start time in `folder/heartbeat.pid` before this call returns.
    """
    os.makedirs(folder, mode=0o700, exist_ok=True)
    agent_start = start_time(agent_pid)
    read_end, write_end = os.pipe()
    first = os.fork()
    if first == 0:  # the intermediate child: start a new session, fork again, leave at once
        os.close(read_end)
        os.setsid()
        if os.fork() != 0:
            os._exit(os.EX_OK)
        detach(os.path.join(folder, log_name), keep=write_end)
        done = done_at_once is not None and done_at_once(agent_start)
        me = os.getpid()
        try:  # by the helper itself, so it is there before the helper may stop and remove it
            record_pid(folder, me, start_time(me) or 0)  # its start time while it surely runs
        except OSError:
            pass
        os.write(write_end, f"{me}".encode())
        os.close(write_end)
        if done:
            os._exit(os.EX_OK)
        try:
            body(agent_start)
        finally:
            os._exit(os.EX_SOFTWARE)  # (body ends the process itself; this only guards the caller's code)
    os.close(write_end)
    os.waitpid(first, 0)
    with os.fdopen(read_end, "rb") as pipe:
        return int(pipe.read() or b"0")


def log_line(text: str) -> None:
    """One line on stderr (the helper's log) in the heartbeater's logging format, without importing logging."""
    now = time.time()
    stamp = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(now))
    os.write(2, f"{stamp},{int(now * 1000) % 1000:03d} heartbeat {text}\n".encode())


def record_pid(folder: str, pid: int, started: int | None = None) -> None:
    # With its start time: in a sandbox with its own pid namespace the pid means another process outside.
    with open(os.path.join(folder, PIDFILE), "w") as f:
        f.write(f"{pid} {started or start_time(pid) or 0}\n")


def detach(log_path: str, *, keep: int) -> None:
    """stdin from /dev/null, stdout and stderr to the log, every other inherited descriptor closed
    (a caller's pipes must see EOF when the caller exits, not when the helper does)."""
    null = os.open(os.devnull, os.O_RDONLY)
    out = os.open(log_path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
    os.dup2(null, 0)
    os.dup2(out, 1)
    os.dup2(out, 2)
    for fd in (null, out):
        if fd > 2:
            os.close(fd)
    os.closerange(3, keep)
    os.closerange(keep + 1, 65536)
