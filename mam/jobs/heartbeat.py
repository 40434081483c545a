"""The heartbeater: a detached process that publishes `heartbeat` for a job every N seconds.

It stops by itself when the job reaches a terminal state or the agent process dies, so a
crashed agent goes silent and its job ends by `deadline_timeout` within K x N seconds.
Run as `python -m mam.jobs.heartbeat --workspace W --job ID --interval S --agent-pid P`.
"""

from __future__ import annotations

import argparse
import logging
import os
import signal
import sys
import time
from pathlib import Path

from mam.errors import BrokerError, JobError, MamError
from mam.util.proc import pid_alive, python_bin, spawn_detached, start_time
from mam.workspace import Workspace

log = logging.getLogger("mam.heartbeat")
PIDFILE = "heartbeat.pid"


def spawn(ws: Workspace, job_id: str, interval_s: float, agent_pid: int, *, agent_python: str = "") -> int:
    """Start the heartbeater detached; return its pid (recorded in the job's log folder)."""
    folder = ws.job_log_dir(job_id)
    folder.mkdir(mode=0o700, parents=True, exist_ok=True)
    argv = [python_bin(agent_python), "-m", "mam.jobs.heartbeat", "--workspace", str(ws.root), "--job", job_id,
            "--interval", str(interval_s), "--agent-pid", str(agent_pid), "--agent-start", str(start_time(agent_pid) or 0)]
    child = spawn_detached(argv, log=folder / "heartbeat.log", env=dict(os.environ), cwd=ws.root)
    (folder / PIDFILE).write_text(f"{child.pid}\n")
    return child.pid


def run(ws: Workspace, job_id: str, interval_s: float, agent_pid: int, agent_start: int | None, *, max_beats: int | None = None) -> str:
    """Beat until the job ends or the agent dies; return why it stopped."""
    from mam.bus.connect import open_client
    from mam.jobs.emit import Emitter, relayed
    from mam.jobs.record import read_record
    from mam.settings import load_settings
    from mam.store.registry import Registry

    settings = load_settings(env_file=ws.env_file)
    registry = Registry(ws)
    client = None
    beats = 0
    record = read_record(ws, job_id)
    # A remote job is supervised by this host's runner: without it nobody relays the beats.
    supervisor = int(record.get("supervisor_pid") or 0), int(record.get("supervisor_start") or 0) or None

    def alive() -> bool:
        return pid_alive(agent_pid, agent_start) and (not supervisor[0] or pid_alive(supervisor[0], supervisor[1]))

    try:
        while True:
            deadline = time.monotonic() + interval_s
            if not alive():
                return "agent_gone"
            if not relayed(record) and (client is None or not client.connected):
                if client is not None:
                    client.close()
                try:
                    client = None if relayed(record) else open_client(settings, ws, role="heartbeater", autostart=False, timeout=min(interval_s, 3.0))
                except BrokerError:
                    client = None  # the disk path still carries the beat
            emitter = Emitter(ws, registry, client)
            try:
                emitter.emit(job_id, "heartbeat", {}, sender="heartbeater")
            except JobError as e:
                return f"job_ended: {e}"
            beats += 1
            if max_beats is not None and beats >= max_beats:
                return "max_beats"
            while time.monotonic() < deadline:
                if not alive():
                    return "agent_gone"
                time.sleep(min(0.2, max(0.0, deadline - time.monotonic())))
    finally:
        if client is not None:
            client.close()
        registry.close()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m mam.jobs.heartbeat")
    parser.add_argument("--workspace", required=True)
    parser.add_argument("--job", required=True)
    parser.add_argument("--interval", type=float, required=True)
    parser.add_argument("--agent-pid", type=int, required=True)
    parser.add_argument("--agent-start", type=int, default=0)
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s heartbeat %(message)s")
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    ws = Workspace(Path(args.workspace))
    try:
        why = run(ws, args.job, args.interval, args.agent_pid, args.agent_start or None)
    except MamError as e:
        why = f"error: {e}"
    log.info("stopped: %s", why)
    try:
        (ws.job_log_dir(args.job) / PIDFILE).unlink()
    except OSError:
        pass
    return 0


if __name__ == "__main__":
    sys.exit(main())
