"""Issue 25, item 1: no mam process imports from a working folder.

`python -m X` and `python -c` put the working folder first on sys.path, so a `json.py`, a
`signal.py` or a `mam/` package another user wrote into a shared project folder would run as the
user of mam. These tests plant all three, each writing a marker when imported, in the session's
folder and in the caller's folder, and run through the real CLI, real tmux, a real broker and the
demo agent and the fake Claude (which runs the hooks mam writes): create, a delegation with
MAM_NOTIFY, a hook call, stop and resume, the monitor, and `mam demo`. The marker must never exist,
and each step must have done its work (so a step that never ran cannot pass).
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path
from typing import Any

from mam.util.poll import wait_for
from mam.workspace import Workspace
from tests.helpers.jobs import FAST
from tests.helpers.mamcli import MAM

PLANTED = ("json.py", "signal.py", "mam/__init__.py")


def plant(folder: Path, marker: Path) -> Path:
    """`folder` with a json.py, a signal.py and a mam/ package that each append a line to `marker`."""
    for name in PLANTED:
        path = folder / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(f"open({str(marker)!r}, 'a').write({name!r} + ' ran\\n')\n")
    return folder


def run(cwd: Path, *args: str, env: dict[str, str] | None = None, timeout: float = 120) -> Any:
    proc = subprocess.run(
        [MAM, *args], cwd=cwd, env={**os.environ, **(env or {})}, capture_output=True, text=True, timeout=timeout
    )
    assert proc.returncode == 0, f"mam {' '.join(args)}: {proc.returncode}\n{proc.stdout}\n{proc.stderr}"
    return proc


def test_nothing_planted_in_the_sessions_or_the_callers_folder_runs(
    workspace: Workspace, amqtt_broker, fake_agents_on_path, tmp_path: Path, monkeypatch
) -> None:
    for key, value in {**amqtt_broker.env(), **FAST}.items():
        monkeypatch.setenv(key, value)
    marker = tmp_path / "planted-code-ran"
    project = plant(tmp_path / "project", marker)
    caller = plant(tmp_path / "caller", marker)
    notified = tmp_path / "notified.json"
    notify = {"MAM_NOTIFY": f"/bin/sh -c 'cat > {notified}'"}

    for agent, name in (("demo", "d"), ("claude", "c")):
        run(caller, "session", "create", "--agent", agent, "--role", "dev", "--session", name, "--cwd", str(project))
    done = json.loads(run(caller, "job", "delegate", "--target", "d", "--brief", "hello", "--json", env=notify).stdout)
    assert done["state"] == "completed", done
    wait_for(lambda: notified.exists() and notified.stat().st_size > 0, timeout=30, message="notification sent")
    assert json.loads(notified.read_text())["job"] == done["id"]

    # The fake Claude runs the hook command mam wrote into its settings, in the session's folder.
    hooked = json.loads(
        run(caller, "job", "delegate", "--target", "c", "--brief", "work a while\nfake-work: 0.5", "--json").stdout
    )
    assert hooked["state"] == "completed", hooked
    rows = json.loads(run(caller, "session", "status", "--json").stdout)
    assert next(r for r in rows if r["name"] == "c")["activity_source"] == "hook", rows

    run(caller, "session", "stop", "--session", "d")
    run(caller, "session", "resume", "--session", "d")
    again = json.loads(run(caller, "job", "delegate", "--target", "d", "--brief", "again", "--json").stdout)
    assert again["state"] == "completed", again
    run(caller, "monitor", "--once", "--json")
    assert "every job ended as expected" in run(caller, "demo", "--no-loop", timeout=300).stdout

    assert not marker.exists(), marker.read_text()
