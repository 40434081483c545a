"""Running the real `mam` CLI from tests, and reading what it left in the workspace."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

MAM = str(Path(sys.executable).parent / "mam")


def mam(
    *args: str, env: dict[str, str] | None = None, timeout: float = 90, check: bool = False, input: str | None = None
) -> subprocess.CompletedProcess[str]:
    full = {**os.environ, **(env or {})}
    proc = subprocess.run([MAM, *args], env=full, capture_output=True, text=True, timeout=timeout, input=input)
    if check and proc.returncode != 0:
        raise AssertionError(
            f"mam {' '.join(args)} exited {proc.returncode}\nstdout: {proc.stdout}\nstderr: {proc.stderr}"
        )
    return proc


def mam_json(*args: str, env: dict[str, str] | None = None, timeout: float = 90) -> Any:
    proc = mam(*args, "--json", env=env, timeout=timeout, check=True)
    return json.loads(proc.stdout)


def default_signals() -> None:
    """preexec_fn for a child a test will interrupt: the default dispositions of SIGINT, SIGTERM and SIGHUP
    back. A suite started in the background (`pytest ... &`) has SIGINT ignored, one under `nohup` SIGHUP,
    every child inherits that, and a program then leaves the signal ignored (Python installs no
    KeyboardInterrupt handler; mam's interrupt handling keeps an ignored signal ignored): the test's signal
    would do nothing."""
    for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, signal.SIG_DFL)


def spawn_mam(*args: str, env: dict[str, str] | None = None) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [MAM, *args],
        env={**os.environ, **(env or {})},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        preexec_fn=default_signals,
    )


def interrupt(proc: subprocess.Popen[str], timeout: float = 30) -> int:
    """Ctrl-C, then its exit code; killed (and the test failed) if it does not end within `timeout`."""
    proc.send_signal(signal.SIGINT)
    try:
        return proc.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()
        raise AssertionError(f"{proc.args} did not end within {timeout} s of SIGINT; killed") from None
