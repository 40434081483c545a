"""Who a command runs for: the calling process's environment, working folder, process ids and streams.

A command run by the `mam` process itself runs for that process: its own `os.environ`, folder, pids
and standard streams. A command the node runs for a client (mam.node) runs for the client, as its
request carried them: the node serves each request in a thread of its own, inside `serving(caller)`.
A library caller that runs a node's command in its own process (mam.node.call: no node may run it)
does the same with streams of its own, as a caller the node does not serve (`node=False`).
Code that would read `os.environ`, `os.getcwd()` or `os.getppid()` on a command's behalf reads them
here instead, so the same code answers for whichever process asked (docs/architecture.md, "The node").
"""

from __future__ import annotations

import contextvars
import os
import sys
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Caller:
    environ: Mapping[str, str]
    cwd: str
    pid: int  # the process that ran `mam ...`
    ppid: int  # its parent: for `mam event`, the agent's shell or the agent
    stdin: Any = None  # the caller's streams (None: this process's own)
    stdout: Any = None
    stderr: Any = None
    on_job: Callable[[str], None] | None = None  # told the job a command drives (the node's client follows it)
    node: bool = True  # served by the node (False: by a library caller of this process, mam.node.call)


_current: contextvars.ContextVar[Caller | None] = contextvars.ContextVar("mam_caller", default=None)


def current() -> Caller:
    """The caller of the command running in this thread (this process, unless the node serves a client)."""
    served = _current.get()
    if served is not None:
        return served
    return Caller(
        environ=os.environ,
        cwd=os.getcwd(),
        pid=os.getpid(),
        ppid=os.getppid(),
        stdin=sys.stdin,
        stdout=sys.stdout,
        stderr=sys.stderr,
    )


def environ() -> Mapping[str, str]:
    served = _current.get()
    return os.environ if served is None else served.environ


def cwd() -> str:
    served = _current.get()
    return os.getcwd() if served is None else served.cwd


def served() -> bool:
    """True inside the node, serving a client's request."""
    served = _current.get()
    return served is not None and served.node


def served_streams() -> Caller | None:
    """The served caller (for its streams), None when the command writes to this process's own."""
    return _current.get()


def stderr() -> Any:
    """The caller's stderr, to hand to a thread of the command's own (which would not see the caller)."""
    served = _current.get()
    return sys.stderr if served is None or served.stderr is None else served.stderr


def announce_job(job_id: str) -> None:
    """The command now drives job `job_id` (a delegation once registered, a wait): in the node, its
    client learns it, to name the job if interrupted and to follow it if the node dies."""
    served = _current.get()
    if served is not None and served.on_job is not None:
        served.on_job(job_id)


@contextmanager
def serving(who: Caller) -> Iterator[None]:
    """Run the body on behalf of `who` (the node for one request, or a library caller; this thread only)."""
    token = _current.set(who)
    try:
        yield
    finally:
        _current.reset(token)
