"""A command the node serves, run for a library caller (the MCP server, a loop) with streams of its own.

The caller's own standard streams are not the command's (the MCP server's stdout is its protocol
stream), so the command writes to two anonymous files that `run` reads back once it ends: its exit
code and what it printed (mam.jobs.command.Answer). It runs in the workspace's node through the thin
client (mam.node.client), as `mam job delegate` does, so the job's owner is the node; a node that dies
under it is handled as for the CLI (the command runs again in the next node, which takes its job over).
When no node may run it (MAM_NODE=0, or MAM_NO_AUTOSTART=1 with none running) it runs here: the same
click command in this thread on the caller's behalf, as the node would have run it (`run_as`), and a
job it leaves open (`--detach`) is followed to its end by a thread of this process, as the node follows
one. Its signals are the caller's own: an interrupted caller closes the connection, and the node lets
the command run on.
"""

from __future__ import annotations

import contextvars
import logging
import os
import tempfile
import threading
from collections.abc import Mapping
from dataclasses import replace
from pathlib import Path
from typing import IO

from mam.cli import cli
from mam.cli.common import run_cli
from mam.jobs.command import Answer, OnJob
from mam.node import client, streams
from mam.outcomes import Exit
from mam.util import caller, interrupts

log = logging.getLogger(__name__)
_routing = threading.Lock()


def run(
    root: str | Path,
    args: list[str],
    *,
    environ: Mapping[str, str],
    cwd: str | None = None,
    on_job: OnJob | None = None,
) -> Answer:
    """`mam --workspace ROOT <args>` in the workspace's node, else here; `environ` and `cwd` (default: the
    workspace) are the caller's; `on_job` is told the job the command drives."""
    argv = ["--workspace", str(root), *args]
    folder = cwd or str(root)
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err, open(os.devnull, "rb") as nothing:
        fds = (nothing.fileno(), out.fileno(), err.fileno())

        def here(argv: list[str]) -> int:
            return run_here(str(root), argv, fds, environ=environ, cwd=folder, on_job=on_job)

        code = client.run(argv, fds, environ=environ, cwd=folder, here=here, on_job=on_job)
        if code is None:
            code = here(argv)
        return Answer(code, _text(out), _text(err))


def run_here(
    root: str,
    argv: list[str],
    fds: tuple[int, int, int],
    *,
    environ: Mapping[str, str],
    cwd: str,
    on_job: OnJob | None = None,
) -> int:
    """`mam <argv>` in this thread, on behalf of a caller of this process whose stdin, stdout and stderr
    are `fds` (a caller the node does not serve: its attempt connects to the broker and starts its
    heartbeater as a command in a process of its own does). A job it leaves open is then followed to
    its end by a thread of this process (`mam job wait`, its output dropped), as the node follows one."""
    _route_streams()
    jobs: list[str] = []

    def announced(job_id: str) -> None:
        jobs.append(job_id)
        if on_job is not None:
            # Outside the command's caller: what the library caller's callback prints is its own.
            contextvars.Context().run(on_job, job_id)

    who = caller.Caller(
        environ=dict(environ),
        cwd=cwd,
        pid=os.getpid(),
        ppid=os.getppid(),
        stdin=streams.Stream(os.dup(fds[0]), "r"),
        stdout=streams.Stream(os.dup(fds[1]), "w"),
        stderr=streams.Stream(os.dup(fds[2]), "w"),
        on_job=announced,
        node=False,
    )
    try:
        code = run_as(who, argv, failed="mam: error: the command failed; see the log of the process that ran it\n")
        who.stdout.flush()
        who.stderr.flush()
    except BaseException:
        _close(who)
        raise
    who.stdout.mute()
    who.stderr.mute()
    interrupted = code - 128 in interrupts.SIGNALS and threading.current_thread() is threading.main_thread()
    if not jobs or interrupted:  # interrupted, the command let go of its job: a follower has it, or it is left open
        _close(who)
    else:
        # Ended already: `mam job wait` says so at once. Still open (`--detach`, a wait that gave up): it drives
        # the job on, as the attempt this process ran would have (its owner is this process: no one else takes
        # it over while this process lives).
        follower = replace(who, on_job=None)  # the library caller has had its answer
        wait = ["--workspace", root, "job", "wait", jobs[-1]]
        name = f"mam-follow-{jobs[-1]}"
        threading.Thread(target=_drive_on, args=(follower, wait), name=name, daemon=True).start()
    if interrupted:
        # A signal reaches the main thread only: the command here took it as the caller's own (Ctrl-C on a loop),
        # let go of its job and returned 128 + the signal; the caller is interrupted as it would be in the node.
        raise interrupts.Interrupted(code - 128)
    return code


def run_as(who: caller.Caller, argv: list[str], *, failed: str) -> int:
    """The click command `mam <argv>` in this thread on behalf of `who` (the node's client, or a library
    caller): its exit code. `failed`: what the caller is told when the command itself broke."""
    with caller.serving(who):
        try:
            return run_cli(cli, argv)
        except SystemExit as e:
            return e.code if isinstance(e.code, int) else Exit.FAILED
        except Exception:
            log.exception("a command failed: %s", argv[:3])
            if who.stderr is not None:
                who.stderr.write(failed)
            return Exit.FAILED


def _drive_on(who: caller.Caller, argv: list[str]) -> None:
    try:
        run_as(who, argv, failed="")
    finally:
        _close(who)


def _close(who: caller.Caller) -> None:
    for stream in (who.stdin, who.stdout, who.stderr):
        stream.close()


def _route_streams() -> None:
    """This process's `sys.stdout` (stdin, stderr) to the caller the current thread runs a command for:
    once, before the first command runs here (the node routes its own at its start)."""
    with _routing:
        streams.install()


def _text(f: IO[bytes]) -> str:
    f.seek(0)
    return f.read().decode("utf-8", errors="replace")
