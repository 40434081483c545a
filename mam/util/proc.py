"""Processes: liveness checks robust to pid reuse, detached helpers, the interpreter to use."""

from __future__ import annotations

import os
import signal
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path

from mam.util.poll import Timeout, wait_for

TYPE_CHECKING = False  # subprocess is imported where a helper is spawned, not by every caller
if TYPE_CHECKING:
    import subprocess


def start_time(pid: int) -> int | None:
    """The process's start time in clock ticks since boot (from /proc), or None if it is gone."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            stat = f.read()
    except OSError:
        return None
    # The command name may hold spaces and ')': fields start after the last ')'.
    fields = stat[stat.rfind(b")") + 2 :].split()
    try:
        if fields[0] == b"Z":
            return None
        return int(fields[19])
    except (IndexError, ValueError):
        return None


def pid_alive(pid: int | None, started: int | None = None) -> bool:
    """True if `pid` runs (not a zombie) and, when given, still has the recorded start time."""
    if not pid or pid <= 0:
        return False
    now = start_time(pid)
    if now is None:
        return False
    return started is None or now == started


def cmdline(pid: int) -> list[str]:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            raw = f.read()
    except OSError:
        return []
    return [part.decode("utf-8", "replace") for part in raw.split(b"\0") if part]


def children(pid: int) -> list[int]:
    try:
        with open(f"/proc/{pid}/task/{pid}/children") as f:
            return [int(x) for x in f.read().split()]
    except OSError:
        return []


# How every mam process starts another Python of mam's: `python -c RUN_MODULE MODULE ARGS...`. Never
# `python -m MODULE`, which (like `-c` itself) puts the working folder first on sys.path, so a
# `json.py` or `mam/` another user planted in a session's or caller's folder would run as this user.
# `-P` would do it, but Python 3.10 (still supported) lacks it, and `-I` also drops the user's
# site-packages and PYTHONPATH. The first statement removes the working folder ('' for `-c`) before
# anything is imported; `sys` is built in. The module name stays in argv: the monitor knows the demo
# agent by it.
RUN_MODULE = (
    "import sys; sys.path[:1] = [p for p in sys.path[:1] if p]; import runpy; "
    "runpy.run_module(sys.argv.pop(1), run_name='__main__', alter_sys=True)"
)


def module_argv(python: str, module: str, *args: str) -> list[str]:
    """`python` running `module` as `__main__` with `args`, importing nothing from the working folder."""
    return [python, "-c", RUN_MODULE, module, *args]


def clean_path(path: str | None = None) -> str:
    """`path` (default: this process's PATH) without its relative and empty entries. An empty entry, `.`
    or `bin` names a folder relative to whichever folder the lookup happens in: a long-lived process
    serving many callers (the node, the MCP server) would run a program planted in a working folder."""
    value = os.environ.get("PATH", os.defpath) if path is None else path
    return os.pathsep.join(p for p in value.split(os.pathsep) if os.path.isabs(p))


def find_program(name: str, path: str | None = None) -> str | None:
    """The absolute path of program `name` on `path` (default: this process's PATH), its relative and
    empty entries left out (`clean_path`); None when it is not there. A `name` holding a `/` (a program
    a setting names, such as HERDR_BIN) is taken as given, made absolute."""
    if os.sep in name:
        return os.path.abspath(name) if os.access(name, os.X_OK) and not os.path.isdir(name) else None
    clean = clean_path(path)
    key = (name, clean)
    found = _FOUND.get(key)
    if found is None or not os.access(found, os.X_OK):  # (looked up again once it is gone)
        import shutil

        found = shutil.which(name, path=clean)
        if found is None:
            _FOUND.pop(key, None)
            return None
        _FOUND[key] = found = os.path.abspath(found)
    return found


_FOUND: dict[tuple[str, str], str] = {}  # (name, cleaned PATH) -> where: the node runs tmux several times per job


def python_bin(agent_python: str = "") -> str:
    """AGENT_PYTHON_BIN if set, else the interpreter running mam now."""
    return agent_python or sys.executable


def spawn_detached(
    argv: Sequence[str],
    *,
    log: Path | None = None,
    env: Mapping[str, str] | None = None,
    cwd: Path | None = None,
) -> subprocess.Popen[bytes]:
    """Start a helper in its own session so it outlives the caller; output to `log` or /dev/null."""
    import subprocess

    out = open(log, "ab") if log is not None else subprocess.DEVNULL
    try:
        return subprocess.Popen(
            list(argv),
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=subprocess.STDOUT if log is not None else subprocess.DEVNULL,
            start_new_session=True,
            close_fds=True,
            env=dict(env) if env is not None else None,
            cwd=cwd,
        )
    finally:
        if log is not None and not isinstance(out, int):
            out.close()


def started_at(pid: int) -> float | None:
    """The process's start as a Unix time (boot time + its start ticks), or None if it is gone."""
    ticks = start_time(pid)
    if ticks is None:
        return None
    try:
        with open("/proc/stat") as f:
            boot = next(int(line.split()[1]) for line in f if line.startswith("btime "))
    except (OSError, StopIteration, ValueError):
        return None
    return boot + ticks / os.sysconf("SC_CLK_TCK")


def process_tree(pid: int) -> list[tuple[int, int]]:
    """`pid` and every descendant, each with its start time (so a later signal never hits a reused pid)."""
    found: list[tuple[int, int]] = []
    todo = [pid]
    while todo:
        current = todo.pop()
        started = start_time(current)
        if started is None:
            continue
        found.append((current, started))
        todo.extend(children(current))
    return found


def end_processes(procs: Sequence[tuple[int, int]], *, grace: float) -> list[int]:
    """Let `procs` (from `process_tree`) end by themselves for up to `grace` s, then SIGTERM the ones left,
    `grace` s more, then SIGKILL; the pids that had to be signalled."""

    def left() -> list[int]:
        return [p for p, started in procs if pid_alive(p, started)]

    signalled: set[int] = set()
    for sig in (0, signal.SIGTERM, signal.SIGKILL):  # 0: first let them end by themselves
        for pid in left() if sig else ():
            try:
                os.kill(pid, sig)
                signalled.add(pid)
            except OSError:
                pass  # it ended meanwhile
        try:
            wait_for(lambda: not left(), timeout=grace, interval=0.05)
            break
        except Timeout:
            continue
    return sorted(signalled)
