"""CPU of whole process trees from /proc, for benchmarks that must count every process involved.

A process's total is utime + stime + cutime + cstime (its own CPU plus that of the children it
reaped). `Accounting` takes snapshots of every process on the host and, for a set of root pids,
sums the growth of the roots and all their descendants between two snapshots (a process that is
new in the second one counts from zero). Daemons that double-fork (tmux servers, mam's
heartbeaters) would be reparented to init and their CPU lost when they exit; `become_subreaper`
makes this process their new parent instead, so they stay visible (as zombies, whose stat still
holds their CPU) until `reap_orphans` reaps them, which adds them to this process's own
RUSAGE_CHILDREN. Linux only.
"""

from __future__ import annotations

import ctypes
import os
import resource
from collections.abc import Iterable
from dataclasses import dataclass

PR_SET_CHILD_SUBREAPER = 36
TICK = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100


@dataclass(frozen=True)
class Proc:
    pid: int
    ppid: int
    state: str
    start: int  # start time in clock ticks since boot: (pid, start) names a process even if its pid is reused
    total: float  # CPU-seconds: own + reaped children
    comm: str
    own: float = 0.0  # CPU-seconds of the process itself (utime + stime)


def become_subreaper() -> bool:
    """Orphaned descendants get this process as their parent (prctl PR_SET_CHILD_SUBREAPER)."""
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        return libc.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) == 0
    except (OSError, AttributeError):
        return False


def read_proc(pid: int) -> Proc | None:
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            raw = f.read()
    except OSError:
        return None
    head, _, rest = raw.rpartition(b")")
    fields = rest.split()
    try:
        comm = head.split(b"(", 1)[1].decode("utf-8", "replace")
        ticks = sum(int(x) for x in fields[11:15])  # utime stime cutime cstime
        own = int(fields[11]) + int(fields[12])
        return Proc(pid, int(fields[1]), fields[0].decode(), int(fields[19]), ticks / TICK, comm, own / TICK)
    except (IndexError, ValueError):
        return None


def snapshot() -> dict[int, Proc]:
    """Every process of the host, by pid."""
    out: dict[int, Proc] = {}
    for name in os.listdir("/proc"):
        if name.isdigit():
            p = read_proc(int(name))
            if p is not None:
                out[p.pid] = p
    return out


def descendants(snap: dict[int, Proc], roots: Iterable[int]) -> set[int]:
    """The roots (those alive in `snap`) and every process below them."""
    children: dict[int, list[int]] = {}
    for p in snap.values():
        children.setdefault(p.ppid, []).append(p.pid)
    found: set[int] = set()
    todo = [r for r in roots if r in snap]
    while todo:
        pid = todo.pop()
        if pid in found:
            continue
        found.add(pid)
        todo.extend(children.get(pid, ()))
    return found


def tree_cpu(before: dict[int, Proc], after: dict[int, Proc], roots: Iterable[int]) -> float:
    """CPU-seconds the trees under `roots` used between the two snapshots."""
    return sum(per_process(before, after, roots).values())


def per_process(before: dict[int, Proc], after: dict[int, Proc], roots: Iterable[int]) -> dict[int, float]:
    """CPU-seconds of each process of the trees under `roots` between the two snapshots (its own and
    its reaped children's)."""
    out: dict[int, float] = {}
    for pid in descendants(after, roots):
        p = after[pid]
        old = before.get(pid)
        base = old.total if old is not None and old.start == p.start else 0.0
        out[pid] = max(0.0, p.total - base)
    return out


def label(pid: int, snap: dict[int, Proc]) -> str:
    """A short name for a process: its command line's most telling word, else its comm."""
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            argv = [a.decode("utf-8", "replace") for a in f.read().split(b"\0") if a]
    except OSError:
        argv = []
    text = " ".join(argv)
    for needle, name in (
        ("demo_agent", "demo agent"),
        ("cao_mock_agent", "mock agent"),
        ("cli_agent_orchestrator", "cao server"),
        ("mosquitto", "broker"),
        ("amqtt", "broker"),
        ("mam.node.server", "node"),
        ("mam node", "node"),
        ("heartbeat", "heartbeater"),
        ("-C attach-session", "tmux control client"),  # the node's (mam.panes.tmux_control)
    ):
        if needle in text:
            return name
    comm = snap[pid].comm if pid in snap else "?"
    if comm.startswith("tmux"):
        return "tmux server"
    if snap.get(pid) is not None and snap[pid].state == "Z":
        return f"exited {comm} (adopted orphan: heartbeater)"
    return comm


def split(before: dict[int, Proc], after: dict[int, Proc], pid: int) -> tuple[float, float]:
    """(own, reaped children's) CPU-seconds of `pid` between the two snapshots."""
    p, old = after[pid], before.get(pid)
    same = old is not None and old.start == p.start
    own = max(0.0, p.own - (old.own if same and old else 0.0))
    total = max(0.0, p.total - (old.total if same and old else 0.0))
    return own, max(0.0, total - own)


def own_children_cpu() -> float:
    """CPU-seconds of every child this process has reaped so far."""
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


def orphan_zombies(snap: dict[int, Proc], keep: Iterable[int] = ()) -> list[int]:
    """Zombie children of this process that no Popen handle of ours owns (orphans we adopted)."""
    me, owned = os.getpid(), set(keep)
    return [p.pid for p in snap.values() if p.ppid == me and p.state == "Z" and p.pid not in owned]


def reap_exact(pid: int) -> float | None:
    """Reap the exited child `pid` and return its CPU-seconds from its rusage (microseconds, where
    /proc's stat has clock ticks); None if it is not an exited child of this process."""
    try:
        got, _status, usage = os.wait4(pid, os.WNOHANG)
    except ChildProcessError:
        return None
    return usage.ru_utime + usage.ru_stime if got == pid else None


def reap_orphans(keep: Iterable[int] = ()) -> int:
    """Reap adopted orphans that have exited (their CPU moves into own_children_cpu); how many."""
    n = 0
    for pid in orphan_zombies(snapshot(), keep):
        try:
            if os.waitpid(pid, os.WNOHANG)[0] == pid:
                n += 1
        except ChildProcessError:
            pass
    return n
