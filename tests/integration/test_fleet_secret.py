"""Without MAM_DISPATCH_SECRET, `mam status --fleet` (and a remote job) says how to make one, in one line,
with a command that works as printed."""

from __future__ import annotations

import re
import subprocess

from mam.workspace import Workspace
from tests.helpers.mamcli import mam


def test_the_fleet_view_says_how_to_make_the_secret(workspace: Workspace) -> None:
    proc = mam("status", "--fleet", env={"MAM_DISPATCH_SECRET": ""})
    assert proc.returncode == 2, proc.stderr
    assert len(proc.stderr.splitlines()) == 1, proc.stderr
    assert "needs MAM_DISPATCH_SECRET" in proc.stderr and "in .mam.env on every host" in proc.stderr
    command = re.search(r"make one with `([^`]+)`", proc.stderr)
    assert command is not None, proc.stderr
    made = subprocess.run(["bash", "-c", command.group(1)], capture_output=True, text=True, check=True).stdout
    assert re.fullmatch(r"[0-9a-f]{64}\n", made), made
