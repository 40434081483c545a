"""The heartbeater: publishes `heartbeat` for a job every N seconds while its agent lives.

It stops by itself when the job reaches a terminal state or the agent process dies, so a
crashed agent goes silent and its job ends by `deadline_timeout` within K x N seconds. Between two
beats it sleeps on the processes' pidfds and on a poke of the job's `ended:<id>` key (mam.util.pokes:
the commit that ends the job pokes it), so a job that ends stops it at once.
`mam event started --heartbeat N` starts it (`begin`): in the node (the command served for the
agent), as a thread of the node, which costs no interpreter; elsewhere as a new interpreter
(`spawn`: never a fork, since the process running the command may hold threads). Its pid (the
node's, for a thread) is in the job's log folder, its log lines in `heartbeat.log` there. A node
that stops hands its threads' jobs to new interpreters; a node killed loses them, and the attempt
that takes the job over in the next node starts the beats again (mam.jobs.delivery), as it does
where the agent CLI kills what its tool commands leave behind (codex's sandbox).
"""

from __future__ import annotations

import argparse
import logging
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

from mam.bus.opener import Opener, opener
from mam.errors import BrokerError, JobError
from mam.jobs.emit import DatabaseStore, Emitter, relayed
from mam.jobs.record import read_record
from mam.outcomes import Exit
from mam.store import jobs as jobs_table
from mam.util import pokes
from mam.util.fdwait import readable
from mam.util.proc import module_argv, pid_alive, python_bin, spawn_detached, start_time
from mam.workspace import Workspace

log = logging.getLogger("mam.heartbeat")
LOG = "heartbeat.log"
PIDFILE = "heartbeat.pid"
# Why a heartbeater stops when the agent's process was never visible to it (a sandbox with its
# own pid namespace, as codex's): it keeps its pid file, so the wrapper outside starts another.
AGENT_UNSEEN = "agent_unseen"


def start(
    ws: Workspace, job_id: str, interval_s: float, agent_pid: int, *, caller_pid: int, environ: Mapping[str, str]
) -> None:
    """`mam event started --heartbeat N`: start the heartbeater (`spawn`), unless the agent's process cannot
    be seen from here (a sandbox with its own pid namespace, as codex's, which also kills what a command
    leaves running): no heartbeater could watch it, so none starts; the pid file names the calling process
    (`caller_pid`, gone once the command ends) and the log says why, for the wrapper outside, which sees
    the agent, to start one (mam.jobs.delivery)."""
    if start_time(agent_pid) is None and not pid_alive(agent_pid):
        folder = ws.job_log_dir(job_id)
        folder.mkdir(mode=0o700, parents=True, exist_ok=True)
        record_pid(folder, caller_pid)
        note(folder, f"stopped: {AGENT_UNSEEN}")
        return
    begin(ws, job_id, interval_s, agent_pid, environ=environ)


_IN_NODE = threading.Event()  # set once by the node process (mam.node.server): its heartbeats are threads


def as_node() -> None:
    """This process is the workspace's node: the heartbeats it starts are threads of it (`begin`)."""
    _IN_NODE.set()


def note(folder: Path, text: str) -> None:
    """One line of the job's heartbeat.log, in the format of the heartbeater's own logging."""
    now = time.time()
    stamp = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(now))
    with open(folder / LOG, "a") as f:
        f.write(f"{stamp},{int(now * 1000) % 1000:03d} heartbeat {text}\n")


def begin(
    ws: Workspace,
    job_id: str,
    interval_s: float,
    agent_pid: int,
    *,
    python: str = "",
    environ: Mapping[str, str] | None = None,
) -> subprocess.Popen[bytes] | None:
    """Start beating for the job: in the node, a thread of it (None); elsewhere a new interpreter (its
    handle: the caller may reap or stop it). `environ`: the settings variables its broker connection comes
    from (the request's that started it)."""
    if not _IN_NODE.is_set():
        return spawn(ws, job_id, interval_s, agent_pid, python=python, environ=environ)
    folder = ws.job_log_dir(job_id)
    folder.mkdir(mode=0o700, parents=True, exist_ok=True)
    beat = Beat(ws, job_id, interval_s, agent_pid, start_time(agent_pid), dict(environ or os.environ))
    # Registered, recorded and started under the lock: `is_running` (the wrapper's look, every second for a
    # CLI that reaps its tools' processes) never sees the pid file of a thread not started yet, which it took
    # for a heartbeater killed, starting a second one (seen once on a loaded machine).
    with _LOCK:
        old = _BEATS.get(job_id)
        if old is not None and old.thread.is_alive():
            return None  # this node beats for it already
        _BEATS[job_id] = beat
        record_pid(folder, os.getpid())
        beat.thread.start()
    return None


@dataclass
class Beat:
    """A heartbeater running as a thread of the node, for one job."""

    ws: Workspace
    job_id: str
    interval_s: float
    agent_pid: int
    agent_start: int | None
    environ: Mapping[str, str]
    leaving: threading.Event = field(default_factory=threading.Event)  # the node stops: a process goes on

    def __post_init__(self) -> None:
        self.thread = threading.Thread(target=self._run, name=f"mam-heartbeat-{self.job_id}", daemon=True)

    def _run(self) -> None:
        folder = self.ws.job_log_dir(self.job_id)
        why = ""
        try:
            why = run(
                self.ws,
                self.job_id,
                self.interval_s,
                self.agent_pid,
                self.agent_start,
                environ=self.environ,
                leaving=self.leaving,
            )
        except Exception as e:
            why = f"error: {e}"
        finally:
            with _LOCK:
                if _BEATS.get(self.job_id) is self:
                    del _BEATS[self.job_id]
            if not self.leaving.is_set():
                note(folder, f"stopped: {why}")
                forget_pid(self.ws, self.job_id)

    def leave(self) -> None:
        """Stop this thread and go on beating in a new interpreter (the node is about to end)."""
        self.leaving.set()
        pokes.poke(self.ws, [pokes.job_ended_key(self.job_id)])  # wakes its wait at once
        self.thread.join(timeout=5)
        if pid_alive(self.agent_pid, self.agent_start) and not self.thread.is_alive():
            spawn(self.ws, self.job_id, self.interval_s, self.agent_pid, environ=self.environ)
            note(self.ws.job_log_dir(self.job_id), f"handed over by the node (pid {os.getpid()}) to a process")


_LOCK = threading.Lock()
_BEATS: dict[str, Beat] = {}  # job id -> its heartbeater thread in this process (the node)


def hand_over() -> None:
    """The node ends: each job it beats for goes on beating in a heartbeater process of its own."""
    with _LOCK:
        beats = list(_BEATS.values())
    for beat in beats:
        beat.leave()


def spawn(
    ws: Workspace,
    job_id: str,
    interval_s: float,
    agent_pid: int,
    *,
    python: str = "",
    environ: Mapping[str, str] | None = None,
) -> subprocess.Popen[bytes]:
    """Start the heartbeater as a new interpreter in its own session, with `environ` (default: this
    process's). The caller may keep the handle (to reap the process, or stop it)."""
    folder = ws.job_log_dir(job_id)
    folder.mkdir(mode=0o700, parents=True, exist_ok=True)
    argv = module_argv(
        python_bin(python),
        "mam.jobs.heartbeat",
        "--workspace",
        str(ws.root),
        "--job",
        job_id,
        "--interval",
        repr(interval_s),
        "--agent-pid",
        str(agent_pid),
        "--agent-start",
        str(start_time(agent_pid) or 0),
    )
    proc = spawn_detached(argv, log=folder / LOG, env=environ, cwd=ws.root)
    record_pid(folder, proc.pid)
    return proc


def record_pid(folder: Path, pid: int) -> None:
    # With its start time: in a sandbox with its own pid namespace the pid means another process outside.
    (folder / PIDFILE).write_text(f"{pid} {start_time(pid) or 0}\n")


def recorded(ws: Workspace, job_id: str) -> tuple[int, int | None] | None:
    """(pid, start time) from the job's heartbeat.pid; None: no file (no heartbeater was started,
    or it stopped by itself)."""
    try:
        fields = (ws.job_log_dir(job_id) / PIDFILE).read_text().split()
        return int(fields[0]), (int(fields[1]) or None) if len(fields) > 1 else None
    except (OSError, ValueError, IndexError):
        return None


def is_running(ws: Workspace, job_id: str) -> bool:
    """The heartbeater recorded in heartbeat.pid still runs (the same process, not a reused pid; in
    this process, its thread)."""
    found = recorded(ws, job_id)
    if found is not None and found[0] == os.getpid():
        with _LOCK:
            beat = _BEATS.get(job_id)
        return beat is not None and beat.thread.is_alive()
    return found is not None and pid_alive(found[0], found[1])


def forget_pid(ws: Workspace, job_id: str) -> None:
    """The heartbeater of this process stopped by itself: its pid file goes (a file naming another
    process, which took over, stays)."""
    try:
        found = recorded(ws, job_id)
        if found is not None and found[0] == os.getpid():
            (ws.job_log_dir(job_id) / PIDFILE).unlink()
    except OSError:
        pass


def main(argv: list[str]) -> int:
    """`python -m mam.jobs.heartbeat --workspace ROOT --job ID --interval S --agent-pid P [--agent-start T]`."""
    parser = argparse.ArgumentParser(prog="python -m mam.jobs.heartbeat")
    parser.add_argument("--workspace", required=True)
    parser.add_argument("--job", required=True)
    parser.add_argument("--interval", type=float, required=True)
    parser.add_argument("--agent-pid", type=int, required=True)
    parser.add_argument("--agent-start", type=int, default=0)
    args = parser.parse_args(argv)
    ws = Workspace(Path(args.workspace))

    def stop(_signum: int, _frame: object) -> None:
        raise SystemExit(Exit.OK)

    signal.signal(signal.SIGTERM, stop)  # the wrapper stops it when the job ends: clean up on the way out
    logging.basicConfig(level=logging.INFO, format="%(asctime)s heartbeat %(message)s", force=True)
    why = ""
    try:
        why = run(ws, args.job, args.interval, args.agent_pid, args.agent_start or None)
        log.info("stopped: %s", why)
    except SystemExit:
        log.info("stopped: terminated")
    except Exception as e:
        log.info("stopped: error: %s", e)
        return Exit.FAILED
    finally:
        if why != AGENT_UNSEEN:
            forget_pid(ws, args.job)
    return Exit.OK


def run(
    ws: Workspace,
    job_id: str,
    interval_s: float,
    agent_pid: int,
    agent_start: int | None,
    *,
    max_beats: int | None = None,
    environ: Mapping[str, str] | None = None,
    leaving: threading.Event | None = None,
) -> str:
    """Beat until the job ends or the agent dies; return why it stopped.

    The first beat comes one interval after `started` (itself the job's last sign of life), so a job
    that ends within its first interval costs one wait and nothing more: the store and the emitter
    are opened at the first beat. Each beat is committed to the store and wakes the job's wrapper
    (which relays it to MQTT), as `mam event` does; only while no wrapper listens does the
    heartbeater connect (importing paho then) and publish the beats itself. Between beats it waits
    on the processes and on the job's pokes: a job that ends stops it at once."""
    record = read_record(ws, job_id)
    # A remote job is supervised by this host's runner: without it nobody relays the beats.
    supervisor = int(record.get("supervisor_pid") or 0), int(record.get("supervisor_start") or 0) or None
    store: DatabaseStore | None = None
    emitter: Emitter | None = None
    connect: Opener | None = None

    def alive() -> bool:
        return pid_alive(agent_pid, agent_start) and (not supervisor[0] or pid_alive(supervisor[0], supervisor[1]))

    def ended() -> str:
        nonlocal store
        if leaving is not None and leaving.is_set():
            return "handed_over"
        store = store or DatabaseStore(ws)
        with store.db.read() as conn:
            row = jobs_table.get(conn, job_id)
        return "" if row.open else f"job_ended: job {job_id} already ended: {row.state} ({row.reason or 'no reason'})"

    # Opened before the first look at `alive` and at the job: a pid reused, or the job's end, after that
    # look cannot be missed. It listens for the job's end only: the job's other changes wake nothing here.
    watch = Watch(
        [agent_pid] + ([supervisor[0]] if supervisor[0] else []),
        alive,
        pokes.Waiter(ws, [pokes.job_ended_key(job_id)]),
    )
    if agent_start is None and not pid_alive(agent_pid):
        watch.close()
        return AGENT_UNSEEN
    beats = 0
    try:
        why = ended()  # the first look: an end committed before the watch listened poked nobody
        if why:
            return why
        while True:
            why = watch.until(time.monotonic() + interval_s, ended)
            if why:
                return why
            if not alive():
                return "agent_gone"
            if emitter is None:
                store = store or DatabaseStore(ws)
                # A beat is on disk before it is published, so a slow broker must not hold the next beat back.
                connect = opener(ws, "heartbeater", timeout=min(interval_s, 3.0), environ=environ)
                emitter = Emitter(
                    ws, store, records={job_id: record}, publish_timeout=max(0.2, min(interval_s, 5.0)), connect=connect
                )
            if emitter.client is None and emitter.connect is None and not relayed(record):
                emitter.connect = connect  # once connected, paho reconnects by itself; until then every beat tries
            try:
                emitter.emit(job_id, "heartbeat", {}, sender="heartbeater")
            except JobError as e:
                return f"job_ended: {e}"
            except BrokerError:
                pass  # the disk path still carries the beat
            beats += 1
            if max_beats is not None and beats >= max_beats:
                return "max_beats"
    finally:
        watch.close()
        if emitter is not None:
            emitter.close()
        if store is not None:
            store.close()


class Watch:
    """Sleeps until a deadline unless one of `pids` exits or the job changes first: on a pidfd (Linux
    5.3+), which becomes readable when its process ends, and on the job's Waiter, so the sleep is one
    wait, not a poll. Where pidfds are missing (macOS, an old kernel) it looks every POLL_S: the job's
    deadline K x N counts from the last beat, so a beat sent after the agent died must not wait for
    the next interval to be noticed."""

    POLL_S = 0.2

    def __init__(self, pids: list[int], alive: Callable[[], bool], waiter: pokes.Waiter) -> None:
        self.alive = alive
        self.waiter = waiter
        self.fds: list[int] = []
        self.polling = False
        for pid in pids:
            try:
                self.fds.append(os.pidfd_open(pid))
            except (AttributeError, OSError):
                self.polling = True  # no pidfd for it (or it is gone already: `alive` says so)

    def until(self, deadline: float, ended: Callable[[], str]) -> str:
        """'' at `deadline` (time.monotonic); "agent_gone" if a watched process ended before it; what
        `ended()` says (why the job is over) once a poke shows the job ended."""
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                return ""
            if not self.alive():
                return "agent_gone"
            fds = [self.waiter.fd] + ([] if self.polling else self.fds)
            ready = readable(fds, min(self.POLL_S, left) if self.polling or not self.fds else left)
            if any(fd in ready for fd in self.fds):
                return "agent_gone"
            if self.waiter.fd in ready:
                self.waiter.drain()
                why = ended()
                if why:
                    return why

    def close(self) -> None:
        for fd in self.fds:
            os.close(fd)
        self.fds = []
        self.waiter.close()


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
