"""The workspace's embedded amqtt broker: a detached process on 127.0.0.1, pidfile and log in `.mam/broker/`.

It never binds anything but loopback and never falls back to a public broker. It accepts only
clients that present the workspace's credentials (mam/broker/credentials.py); one started by an
older mam (which accepted anyone) is shown as such, and `start` replaces it.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import time
from dataclasses import dataclass
from pathlib import Path

from mam.broker import credentials
from mam.errors import BrokerError
from mam.settings import Settings
from mam.util import proc
from mam.util.flock import FileLock
from mam.util.fs import atomic_write_json
from mam.util.trust import check_process
from mam.workspace import Workspace

STATE_FILE = "broker.json"
PID_FILE = "broker.pid"
LOG_FILE = "broker.log"
SERVE_MODULE = "mam.broker.serve"


@dataclass(frozen=True)
class BrokerStatus:
    running: bool
    pid: int | None
    port: int | None
    log: Path
    stale: bool = False  # a pidfile was left by a broker that is gone
    username: str | None = None  # the login it accepts (None: none yet, or an older broker that accepts anyone)
    password_file: Path | None = None
    authenticated: bool = True  # False: a running broker started by an older mam, open to every local user

    def as_dict(self) -> dict[str, object]:
        return {
            "running": self.running,
            "pid": self.pid,
            "port": self.port,
            "host": "127.0.0.1",
            "log": str(self.log),
            "stale": self.stale,
            "authenticated": self.authenticated,
            "username": self.username,
            "password_file": str(self.password_file) if self.password_file else None,
        }


def _paths(ws: Workspace) -> tuple[Path, Path, Path]:
    d = ws.broker_dir
    return d / STATE_FILE, d / PID_FILE, d / LOG_FILE


def _read_state(ws: Workspace) -> dict[str, object]:
    state_file, _, _ = _paths(ws)
    try:
        with open(state_file, encoding="utf-8") as f:
            data = json.load(f)
        return data if isinstance(data, dict) else {}
    except (OSError, ValueError):
        return {}


def _is_our_broker(pid: int, started: object, state_file: Path) -> bool:
    if not proc.pid_alive(pid, started if isinstance(started, int) else None):
        return False
    # Another user's process under that pid (reused, or planted to catch our events) is refused, not used.
    check_process(pid, what="broker pid file", pid_file=state_file)
    return SERVE_MODULE in " ".join(proc.cmdline(pid))


def status(ws: Workspace) -> BrokerStatus:
    """Read-only: never starts anything, never writes a file."""
    state_file, _, log = _paths(ws)
    state = _read_state(ws)
    pid, recorded_port = state.get("pid"), state.get("port")
    port = recorded_port if isinstance(recorded_port, int) else None
    path = credentials.password_path(ws)
    username, password_file = (credentials.USERNAME, path) if path.exists() else (None, None)
    if not isinstance(pid, int):
        return BrokerStatus(False, None, port, log, username=username, password_file=password_file)
    alive = _is_our_broker(pid, state.get("pid_start"), state_file)
    if alive and not state.get("password_file"):
        return BrokerStatus(True, pid, port, log, authenticated=False)
    return BrokerStatus(
        alive, pid if alive else None, port, log, stale=not alive, username=username, password_file=password_file
    )


def port_accepts(port: int, host: str = "127.0.0.1", timeout: float = 0.2) -> bool:
    try:
        with socket.create_connection((host, port), timeout=timeout):
            return True
    except OSError:
        return False


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _port_free(port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind(("127.0.0.1", port))
            return True
        except OSError:
            return False


def _choose_port(ws: Workspace, settings: Settings) -> int:
    wanted = settings.embedded_broker_port
    if wanted:
        return wanted
    previous = _read_state(ws).get("port")
    if isinstance(previous, int) and _port_free(previous):
        return previous
    return free_port()


def start(ws: Workspace, settings: Settings, *, timeout: float = 15.0, on_demand: bool = False) -> BrokerStatus:
    """Start the embedded broker if it is not running; harmless when it is. `on_demand`: started because a
    command needed it (recorded: the workspace's node stops such a broker when it ends with nothing left,
    never one started with `mam broker start`)."""

    ws.ensure_state()
    ws.broker_dir.mkdir(mode=0o700, exist_ok=True)

    with FileLock(str(ws.lock("broker"))):
        login, new_login = credentials.ensure(ws)
        current = status(ws)
        if current.running and current.pid and (new_login or not current.authenticated):
            # Started by an older mam (it lets every local user in), or with a password file that has
            # since been removed: replace it, on the same port, so it takes the current login.
            _stop_pid(current.pid, 10.0)
            current = status(ws)
        if current.running and current.port and port_accepts(current.port):
            return current
        if current.running and current.pid:
            # Alive but not accepting: wait briefly for a starting broker before declaring it broken.
            if _wait_port(current.port or 0, current.pid, 5.0):
                return status(ws)
            raise BrokerError(
                f"embedded broker pid {current.pid} runs but does not accept connections; see {current.log}"
            )
        port = _choose_port(ws, settings)
        if not _port_free(port):
            raise BrokerError(f"port {port} on 127.0.0.1 is taken; set MAM_BROKER_PORT to a free port (or 0)")
        state_file, pid_file, log = _paths(ws)
        argv = proc.module_argv(
            proc.python_bin(settings.agent_python_bin),
            SERVE_MODULE,
            "--port",
            str(port),
            "--username",
            login.username,
            "--password-file",
            str(login.path),
        )
        child = proc.spawn_detached(argv, log=log, cwd=ws.root)
        started = None
        for _ in range(50):
            started = proc.start_time(child.pid)
            if started is not None:
                break
        atomic_write_json(
            state_file,
            {
                "pid": child.pid,
                "pid_start": started,
                "port": port,
                "started_at": time.time(),
                "username": login.username,
                "password_file": str(login.path),
                "on_demand": on_demand,
            },
            mode=0o600,
        )
        pid_file.write_text(f"{child.pid}\n")
        if not _wait_port(port, child.pid, timeout):
            if child.poll() is None:
                child.kill()
            tail = _log_tail(log)
            raise BrokerError(f"embedded broker did not start on 127.0.0.1:{port}; log {log}:\n{tail}")
        return status(ws)


def started_on_demand(ws: Workspace) -> bool:
    """Whether the broker that runs (or last ran) was started on demand, not by `mam broker start`."""
    return _read_state(ws).get("on_demand") is True


def _wait_port(port: int, pid: int, timeout: float) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if port and port_accepts(port):
            return True
        if not proc.pid_alive(pid):
            return False
        time.sleep(0.02)
    return False


def stop(ws: Workspace, *, timeout: float = 10.0) -> BrokerStatus:
    """Stop the embedded broker (SIGINT, then SIGKILL) and remove its pidfile; harmless when stopped."""
    current = status(ws)
    state_file, pid_file, _ = _paths(ws)
    if current.running and current.pid:
        _stop_pid(current.pid, timeout)
    pid_file.unlink(missing_ok=True)
    state = _read_state(ws)
    if state:
        # Keep the port so the next start reuses it; forget the pid.
        atomic_write_json(state_file, {"port": state.get("port")}, mode=0o600)
    return status(ws)


def _stop_pid(pid: int, timeout: float) -> None:
    _signal(pid, signal.SIGINT)
    if not _wait_gone(pid, timeout):
        _signal(pid, signal.SIGKILL)
        _wait_gone(pid, 5.0)


def _signal(pid: int, sig: signal.Signals) -> None:
    try:
        os.kill(pid, sig)
    except ProcessLookupError:
        pass


def _wait_gone(pid: int, timeout: float) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            # Reap it if it is our child (the same process started and stops it in tests).
            os.waitpid(pid, os.WNOHANG)
        except ChildProcessError:
            pass
        if not proc.pid_alive(pid):
            return True
        time.sleep(0.02)
    return not proc.pid_alive(pid)


def _log_tail(log: Path, lines: int = 15) -> str:
    try:
        return "\n".join(log.read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return "(no log)"
