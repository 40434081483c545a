"""Running the real `mam` CLI from tests, and reading what it left in the workspace."""

from __future__ import annotations

import json
import os
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


def spawn_mam(*args: str, env: dict[str, str] | None = None) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [MAM, *args], env={**os.environ, **(env or {})}, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
