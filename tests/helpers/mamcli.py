"""Running the real `mam` CLI from tests, and reading what it left in the workspace."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

MAM = str(Path(sys.executable).parent / "mam")


# Commands that read the workspace or change a record and end (never one that runs on: `monitor`, `web`,
# `board watch`, `job wait`, `job delegate`, `loop`...): `mam` runs them in this process (`in_process`) as the
# `mam` script runs a click command, under click's test isolation, which swaps the process's standard streams: from
# the main thread only (a test's threads run `mam` processes) and with no `env` of the call's own. Each `mam`
# process of the ~1,200 a run made cost 75-110 ms of CPU, nearly all of it start-up and imports; a test about
# the process itself runs it with `spawn_mam` or `subprocess`.
IN_PROCESS = {
    ("job", "status"),
    ("job", "list"),
    ("job", "log"),
    ("session", "status"),
    ("session", "stop"),
    ("session", "resume"),
    ("job", "pause"),
    ("job", "resume"),
    ("job", "cancel"),
    ("node", "stop"),
    ("board", "set"),
    ("board", "get"),
    ("board", "list"),
    ("role", "add"),
    ("task", "add"),
    ("node", "status"),
    ("loop", "status"),
    ("routine", "list"),
    ("routine", "log"),
    ("task", "list"),
    ("task", "show"),
}
_GLOBAL_WITH_VALUE = ("-w", "--workspace", "--env-file")


def _command(args: tuple[str, ...]) -> tuple[str, ...]:
    """The command's two words after the global options."""
    i = 0
    while i < len(args) and args[i].startswith("-"):
        i += 2 if args[i] in _GLOBAL_WITH_VALUE else 1
    return tuple(args[i : i + 2])


def in_process(
    args: tuple[str, ...], input: str | None = None, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    """`mam ARGS` run in this process, as the `mam` script runs a click command (mam.cli.common.run_cli); `env` is
    set in the environment for the call."""
    from click.testing import CliRunner

    from mam.cli import cli
    from mam.cli.common import run_cli

    with CliRunner().isolation(input=input, env=env) as (out, err, _):
        code = run_cli(cli, list(args))
        printed, said = out.getvalue().decode(), err.getvalue().decode()
    return subprocess.CompletedProcess([MAM, *args], code, printed, said)


def mam(
    *args: str, env: dict[str, str] | None = None, timeout: float = 90, check: bool = False, input: str | None = None
) -> subprocess.CompletedProcess[str]:
    if not env and _command(args) in IN_PROCESS and threading.current_thread() is threading.main_thread():
        proc = in_process(args, input)
    else:
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
