"""What the bench scripts share: private brokers on free loopback ports, a clean environment,
medians, and a description of the machine. Nothing here reads the user's settings.

Every process started here is stopped through its own Popen handle (never by name), and
no broker ever binds anything but 127.0.0.1 or uses port 1883.
"""

from __future__ import annotations

import os
import platform
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

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
