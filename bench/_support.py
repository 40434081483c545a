"""What the bench scripts share: private brokers on free loopback ports, a clean environment,
a throw-away demo workspace, medians, and a description of the machine. Nothing here reads the
user's settings.

Every process started here is stopped through its own Popen handle (never by name), and
no broker ever binds anything but 127.0.0.1 or uses port 1883.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:
    sys.path.append(str(REPO))

from tests.helpers.brokers import RunningBroker, mosquitto_bin, start_amqtt, start_mosquitto  # noqa: E402,F401  (re-exported)

VENV_BIN = REPO / ".venv" / "bin"
ENV_PREFIXES = ("MQTT_", "MAM_", "HERDR_", "TMUX", "AGENT_PYTHON")


def venv_python() -> Path:
    """The venv's own interpreter (no pyenv shim), else the one running this script."""
    candidate = VENV_BIN / "python"
    return candidate if candidate.exists() else Path(sys.executable)


# The brokers are the tests' own (same start-up, same stop by handle).
Broker = RunningBroker


def clean_environ(pycache: Path | None = None, **extra: str) -> dict[str, str]:
    """This process's environment without any mam/MQTT/tmux settings, plus `extra`.

    With `pycache`, child interpreters cache bytecode there (PYTHONPYCACHEPREFIX) even when this
    environment sets PYTHONDONTWRITEBYTECODE: an installed mam has its .pyc files, and without
    them every start compiles mam's modules again, which is not what users pay. Nothing is
    written into the repository.
    """
    env = {k: v for k, v in os.environ.items() if not k.startswith(ENV_PREFIXES)}
    if pycache is not None:
        env.pop("PYTHONDONTWRITEBYTECODE", None)
        env["PYTHONPYCACHEPREFIX"] = str(pycache)
    env.update(extra)
    return env


def median(values: list[float]) -> float:
    return statistics.median(values) if values else float("nan")


def _first_line(argv: list[str]) -> str:
    try:
        proc = subprocess.run(argv, capture_output=True, text=True, timeout=10)
    except (OSError, subprocess.TimeoutExpired):
        return "not installed"
    text = (proc.stdout or proc.stderr).strip().splitlines()
    return text[0] if text else "unknown"


def _version(dist: str) -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version(dist)
    except PackageNotFoundError:
        return "not installed"


def machine() -> dict[str, str]:
    """Where the numbers come from: cores, interpreter, broker and library versions, load, date."""
    mosquitto = mosquitto_bin()
    load = os.getloadavg() if hasattr(os, "getloadavg") else (0.0, 0.0, 0.0)
    return {
        "date": time.strftime("%Y-%m-%d %H:%M:%S %Z"),
        "nproc": str(os.cpu_count()),
        "cpu": _cpu_model(),
        "python": f"{platform.python_version()} ({venv_python()})",
        "mosquitto": _first_line([mosquitto, "-h"]) if mosquitto else "not installed",
        "tmux": _first_line(["tmux", "-V"]) if shutil.which("tmux") else "not installed",
        "paho-mqtt": _version("paho-mqtt"),
        "amqtt": _version("amqtt"),
        "loadavg": " ".join(f"{x:.2f}" for x in load),
    }


def _cpu_model() -> str:
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def tmux_socket(name: str) -> Path:
    return Path(os.environ.get("TMUX_TMPDIR") or "/tmp") / f"tmux-{os.getuid()}" / name


def kill_tmux(name: str) -> None:
    """Kill a private tmux server through its own socket, then remove the socket file."""
    if tmux_socket(name).exists():
        subprocess.run(["tmux", "-L", name, "kill-server"], capture_output=True, timeout=10)
    tmux_socket(name).unlink(missing_ok=True)


# -- a throw-away demo workspace (delegate_overhead, mcp_roundtrip) ----------------------------

DEMO_SESSION = "bench"


def jobs_args(argv: list[str] | None, description: str | None, jobs_help: str) -> argparse.Namespace:
    """`--jobs N` (positive), `--broker mosquitto|amqtt`, `--json`."""
    parser = argparse.ArgumentParser(description=description, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--jobs", type=int, default=10, help=jobs_help)
    parser.add_argument(
        "--broker",
        choices=("mosquitto", "amqtt"),
        default="mosquitto",
        help="private broker to use (default mosquitto)",
    )
    parser.add_argument("--json", action="store_true", help="print the result as JSON")
    args = parser.parse_args(argv)
    if args.jobs <= 0:
        parser.error("--jobs must be positive")
    return args


def have_tmux(prog: str) -> bool:
    """Whether tmux is installed; if not, says so on stderr as `prog: error: ...`."""
    if shutil.which("tmux") is None:
        print(f"{prog}: error: tmux is not installed", file=sys.stderr)
        return False
    return True


def run_mam(args: list[str], env: dict[str, str], cwd: Path, timeout: float = 90) -> subprocess.CompletedProcess[str]:
    proc = subprocess.run(
        [str(VENV_BIN / "mam"), *args], env=env, cwd=cwd, capture_output=True, text=True, timeout=timeout
    )
    if proc.returncode != 0:
        raise RuntimeError(f"mam {' '.join(args[:3])} exited {proc.returncode}: {proc.stderr.strip()[-800:]}")
    return proc


def wait_heartbeaters_gone(ws: Any, timeout: float = 15) -> None:
    """The demo agent's heartbeaters stop by themselves once their agent is gone; wait for that."""
    from mam.util.proc import pid_alive

    deadline = time.monotonic() + timeout
    for pidfile in ws.logs_dir.glob("*/heartbeat.pid"):
        try:
            pid = int(pidfile.read_text().strip())
        except (OSError, ValueError):
            continue
        while pid_alive(pid) and time.monotonic() < deadline:
            time.sleep(0.05)


def node_pid(root: Path) -> int:
    """The pid of workspace `root`'s node (mam/node: it runs every `mam job delegate`, `mam job wait`
    and agent `mam event` in a thread), from `.mam/run/node.json`, if that process still is a node;
    else 0. A node started on demand is nobody's child here (it runs in its own session), so its
    CPU is read from /proc, not from this process's RUSAGE_CHILDREN."""
    try:
        pid = int(json.loads((root / ".mam" / "run" / "node.json").read_text())["pid"])
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            argv = f.read()
    except (OSError, ValueError, KeyError, TypeError):
        return 0
    return pid if b"mam.node.server" in argv or b"mam\0node" in argv else 0


def node_cpu_s(root: Path) -> float:
    """CPU-seconds of the node so far: its own (every thread: the attempts, the served `mam event`s)
    and that of the children it reaped (the heartbeaters it started); 0: none runs."""
    from bench import _cpu as cpu

    pid = node_pid(root)
    proc = cpu.read_proc(pid) if pid else None
    return proc.total if proc is not None else 0.0


def rss_kb(pid: int) -> int:
    """Resident memory of a process, kB (0: gone)."""
    try:
        with open(f"/proc/{pid}/status", encoding="utf-8") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1])
    except (OSError, ValueError, IndexError):
        pass
    return 0


def wait_node(root: Path, timeout: float = 20) -> int:
    """After a workspace's first delegation: until its node serves (or `timeout`); its pid, or 0."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        pid = node_pid(root)
        if pid and (root / ".mam" / "run" / "node.sock").exists():
            return pid
        time.sleep(0.05)
    return 0


@dataclass
class DemoBench:
    root: Path
    ws: Any  # mam.workspace.Workspace
    env: dict[str, str]


@contextmanager
def demo_workspace(prefix: str, broker_kind: str) -> Iterator[DemoBench]:
    """A temporary workspace with its own HOME, a private tmux server (a unique socket name), a
    private broker of `broker_kind` and one demo agent session `DEMO_SESSION`. Afterwards the tmux
    server, the heartbeaters, the broker and the temporary folder are gone."""
    from mam.workspace import Workspace

    root = Path(tempfile.mkdtemp(prefix=prefix))
    tmux_name = f"mam-bench-{uuid.uuid4().hex[:8]}"
    broker = None
    ws = Workspace((root / "ws").resolve())
    try:
        ws.root.mkdir()
        home = root / "home"
        for sub in ("", ".config", ".local/share", ".cache"):
            (home / sub).mkdir(parents=True, exist_ok=True)
        broker = (start_amqtt if broker_kind == "amqtt" else start_mosquitto)(root)
        env = clean_environ(
            root / "pycache",
            MAM_WORKSPACE=str(ws.root),
            MAM_TMUX_SERVER=tmux_name,
            MQTT_BROKER=broker.host,
            MQTT_PORT=str(broker.port),
            HOME=str(home),
            XDG_CONFIG_HOME=str(home / ".config"),
            XDG_DATA_HOME=str(home / ".local/share"),
            XDG_CACHE_HOME=str(home / ".cache"),
            SHELL="/bin/sh",
            MAM_DEMO_BEHAVIOUR="ok",
            PATH=os.pathsep.join([str(VENV_BIN), os.environ.get("PATH", os.defpath)]),
        )
        run_mam(
            ["session", "create", "--agent", "demo", "--role", "dev", "--session", DEMO_SESSION, "--json"], env, ws.root
        )
        yield DemoBench(root, ws, env)
    finally:
        kill_tmux(tmux_name)
        wait_heartbeaters_gone(ws)
        if broker is not None:
            broker.stop()
        shutil.rmtree(root, ignore_errors=True)
