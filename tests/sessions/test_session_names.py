"""A session is named the same two ways by every command that acts on one: `mam session stop dev-1` or
`mam session stop --session dev-1` (stop, resume, remove, attach); both at once, or neither, is a usage
error that changes nothing."""

from __future__ import annotations

from typing import Any

from mam.workspace import Workspace
from tests.helpers.mamcli import mam, mam_json


def status() -> dict[str, str]:
    return {r["name"]: r["status"] for r in mam_json("session", "status")}


def test_stop_resume_attach_and_remove_take_the_name_either_way(workspace: Workspace, tmux_server: Any) -> None:
    mam("session", "create", "--agent", "demo", "--role", "dev", "--session", "dev-1", check=True)
    proc = mam("session", "stop", "dev-1")
    assert proc.returncode == 0, proc.stderr
    assert status() == {"dev-1": "stopped"}
    proc = mam("session", "resume", "dev-1")
    assert proc.returncode == 0, proc.stderr
    assert status() == {"dev-1": "running"}
    for command in ("stop", "resume", "attach", "remove"):
        both = mam("session", command, "dev-1", "--session", "dev-1")
        assert both.returncode == 2 and f"mam session {command} NAME" in both.stderr, (command, both.stderr)
        neither = mam("session", command)
        assert neither.returncode == 2, (command, neither.stderr)
    assert status() == {"dev-1": "running"}
    for how in (["dev-1"], ["--session", "dev-1"]):
        proc = mam("session", "attach", *how, "--print")
        assert proc.returncode == 0 and "tmux" in proc.stdout, proc.stderr
    mam("session", "stop", "--session", "dev-1", check=True)  # the option spelling still works
    mam("session", "resume", "--session", "dev-1", check=True)
    mam("session", "stop", "dev-1", check=True)
    mam("session", "remove", "dev-1", check=True)
    assert status() == {}
