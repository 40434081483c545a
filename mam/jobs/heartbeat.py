"""The heartbeater: a detached process that publishes `heartbeat` for a job every N seconds.

It stops by itself when the job reaches a terminal state or the agent process dies, so a
crashed agent goes silent and its job ends by `deadline_timeout` within K x N seconds.
`mam event started --heartbeat N` forks it (see `fork`); its pid is in the job's log folder.
Where the agent CLI kills what its tool commands leave behind (codex's sandbox), the delegation
wrapper starts it again as `python -m mam.jobs.heartbeat ...` (see `spawn`; the pane delivery).
"""

from __future__ import annotations

import argparse
import logging
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

from mam.bus.opener import opener
from mam.errors import BrokerError, JobError
from mam.jobs.emit import DatabaseStore, Emitter, relayed
from mam.jobs.outcomes import Exit
from mam.jobs.record import read_record
from mam.util.fdwait import readable
from mam.util.fork import AGENT_UNSEEN, PIDFILE, detached, record_pid
from mam.util.proc import module_argv, pid_alive, python_bin, spawn_detached, start_time
from mam.workspace import Workspace

log = logging.getLogger("mam.heartbeat")
LOG = "heartbeat.log"


def fork(ws: Workspace, job_id: str, interval_s: float, agent_pid: int) -> int:
    """Become the heartbeater in a detached child of this process (no new interpreter, no re-imports).

    The caller must hold no threads and no open connections (fork copies only the calling thread).
    Returns the heartbeater's pid, also recorded in the job's log folder.
    """
    folder = str(ws.job_log_dir(job_id))
    return detached(folder, agent_pid, lambda start: beat_here(ws, job_id, interval_s, agent_pid, start), log_name=LOG)


def beat_here(
    ws: Workspace,
    job_id: str,
    interval_s: float,
    agent_pid: int,
    agent_start: int | None,
    *,
    beaten_at: float | None = None,
) -> None:
    """The forked heartbeater's whole life (mam.util.fork.detached's body): beat, then end the process."""
    code, why = Exit.OK, ""
    try:
        logging.basicConfig(level=logging.INFO, format="%(asctime)s heartbeat %(message)s", force=True)
        why = run(ws, job_id, interval_s, agent_pid, agent_start, beaten_at=beaten_at)
        log.info("stopped: %s", why)
    except BaseException as e:  # the heartbeater must end here, never back in the caller's code
        log.info("stopped: error: %s", e)
        code = Exit.FAILED
    finally:
        if why != AGENT_UNSEEN:  # unseen: the pid file stays, for the wrapper to take over
            try:
                (ws.job_log_dir(job_id) / PIDFILE).unlink()
            except OSError:
                pass
        os._exit(code)


def spawn(
    ws: Workspace, job_id: str, interval_s: float, agent_pid: int, *, python: str = ""
) -> subprocess.Popen[bytes]:
    """Start the heartbeater as a new interpreter in its own session (for a caller that holds threads,
    where fork is unsafe). The caller keeps the handle: it reaps the process and may stop it."""
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
    proc = spawn_detached(argv, log=folder / LOG)
    record_pid(str(folder), proc.pid)
    return proc


def recorded(ws: Workspace, job_id: str) -> tuple[int, int | None] | None:
    """(pid, start time) from the job's heartbeat.pid; None: no file (no heartbeater was started,
    or it stopped by itself)."""
    try:
        fields = (ws.job_log_dir(job_id) / PIDFILE).read_text().split()
        return int(fields[0]), (int(fields[1]) or None) if len(fields) > 1 else None
    except (OSError, ValueError, IndexError):
        return None


def is_running(ws: Workspace, job_id: str) -> bool:
    """The heartbeater recorded in heartbeat.pid still runs (the same process, not a reused pid)."""
    found = recorded(ws, job_id)
    return found is not None and pid_alive(found[0], found[1])


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
    pidfile = ws.job_log_dir(args.job) / PIDFILE

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
        try:
            found = recorded(ws, args.job)
            if why != AGENT_UNSEEN and found is not None and found[0] == os.getpid():
                pidfile.unlink()
        except OSError:
            pass
    return Exit.OK


def run(
    ws: Workspace,
    job_id: str,
    interval_s: float,
    agent_pid: int,
    agent_start: int | None,
    *,
    max_beats: int | None = None,
    beaten_at: float | None = None,
) -> str:
    """Beat until the job ends or the agent dies; return why it stopped. `beaten_at` (time.monotonic):
    when the first beat was sent already (mam.fast_event sends it before this module is imported, and
    may have waited part of the interval since), so the next one is due an interval after it.

    Each beat is committed to the store and wakes the job's wrapper (which relays it to MQTT), as
    `mam event` does; only while no wrapper listens does the heartbeater connect (importing paho
    then) and publish the beats itself."""
    store = DatabaseStore(ws)
    beats = 0
    record = read_record(ws, job_id)
    # A remote job is supervised by this host's runner: without it nobody relays the beats.
    supervisor = int(record.get("supervisor_pid") or 0), int(record.get("supervisor_start") or 0) or None

    def alive() -> bool:
        return pid_alive(agent_pid, agent_start) and (not supervisor[0] or pid_alive(supervisor[0], supervisor[1]))

    # Opened before the first look at `alive`: a pid reused after that look cannot be the one watched.
    watch = Watch([agent_pid] + ([supervisor[0]] if supervisor[0] else []), alive)

    # A beat is on disk before it is published, so a slow broker must not hold the next beat back.
    connect = opener(ws, "heartbeater", timeout=min(interval_s, 3.0))
    emitter = Emitter(
        ws, store, records={job_id: record}, publish_timeout=max(0.2, min(interval_s, 5.0)), connect=connect
    )
    if agent_start is None and not pid_alive(agent_pid):
        watch.close()
        store.close()
        return AGENT_UNSEEN
    try:
        while True:
            deadline = (time.monotonic() if beaten_at is None else beaten_at) + interval_s
            if not alive():
                return "agent_gone"
            if emitter.client is None and emitter.connect is None and not relayed(record):
                emitter.connect = connect  # once connected, paho reconnects by itself; until then every beat tries
            try:
                if beaten_at is None:
                    emitter.emit(job_id, "heartbeat", {}, sender="heartbeater")
                beaten_at = None
            except JobError as e:
                return f"job_ended: {e}"
            except BrokerError:
                pass  # the disk path still carries the beat
            beats += 1
            if max_beats is not None and beats >= max_beats:
                return "max_beats"
            if watch.gone_before(deadline) or not alive():
                return "agent_gone"
    finally:
        watch.close()
        emitter.close()
        store.close()


class Watch:
    """Sleeps until a deadline unless one of `pids` exits first: on a pidfd (Linux 5.3+), which becomes
    readable when its process ends, so the sleep is one wait, not a poll. Where pidfds are missing
    (macOS, an old kernel) it looks every POLL_S: the job's deadline K x N counts from the last beat,
    so a beat sent after the agent died must not wait for the next interval to be noticed."""

    POLL_S = 0.2

    def __init__(self, pids: list[int], alive: Callable[[], bool]) -> None:
        self.alive = alive
        self.fds: list[int] = []
        self.polling = False
        for pid in pids:
            try:
                self.fds.append(os.pidfd_open(pid))
            except (AttributeError, OSError):
                self.polling = True  # no pidfd for it (or it is gone already: `alive` says so)

    def gone_before(self, deadline: float) -> bool:
        """True if a watched process ended before `deadline` (time.monotonic); False at the deadline."""
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                return False
            if not self.alive():
                return True
            if self.polling or not self.fds:
                time.sleep(min(self.POLL_S, left))
                continue
            ready = readable(self.fds, left)
            if ready:
                return True

    def close(self) -> None:
        for fd in self.fds:
            os.close(fd)
        self.fds = []


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
