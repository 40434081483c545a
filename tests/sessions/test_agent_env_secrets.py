"""mam's secrets never reach a session's agent: its process environment, read from /proc, holds
no broker password, dispatch secret or mam token, on both backends, after create and after resume.
"""

from __future__ import annotations

import os
import signal
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from mam.panes.herdr import HerdrBackend
from mam.util.proc import cmdline, pid_alive
from mam.workspace import Workspace
from tests.helpers.mamcli import mam, mam_json
from tests.panes.conftest import fake_server_state, herdr_name, herdr_on_path, settings, short_config_home  # noqa: F401

SECRETS = {
    "MQTT_PASSWORD": "hunter2-broker-password",
    "MAM_DISPATCH_SECRET": "dispatch-secret-0123456789",
    "MAM_JOB_TOKEN": "9c1f2e3d4b5a6978job-token",
    "MAM_RUNNER_SECRET": "runner-secret-value",
}
HARMLESS = {"MQTT_USERNAME": "alice", "ANTHROPIC_API_KEY": "the-agents-own-key", "MAM_TEST_MARKER": "kept"}


def environ_of(pid: int) -> dict[str, str]:
    raw = Path(f"/proc/{pid}/environ").read_bytes()
    return dict(item.split("=", 1) for item in raw.decode("utf-8", "replace").split("\0") if "=" in item)


def agent_environ(name: str) -> dict[str, str]:
    row = next(r for r in mam_json("session", "status") if r["name"] == name)
    pid = row["pane_pid"]
    assert pid and "demo" in " ".join(cmdline(pid)), (row, cmdline(pid or 0))  # the agent itself, not a shell
    return environ_of(pid)


def assert_clean(env: dict[str, str]) -> None:
    leaked = {k for k, v in env.items() if k in SECRETS or v in SECRETS.values()}
    assert not leaked, f"secrets in the agent's environment: {sorted(leaked)}"
    for key, value in HARMLESS.items():
        assert env.get(key) == value, key  # only mam's secrets go; the rest of the environment stays
    assert env["MAM_WORKSPACE"] and env["MAM_SESSION"]


@pytest.fixture
def herdr_server(workspace: Workspace, short_config_home: Path, herdr_on_path: Path) -> Iterator[str]:  # noqa: F811
    name = herdr_name()
    yield name
    backend = HerdrBackend(name, settings=settings(), ws=workspace)
    state_file = backend.socket_path.parent / "fake-server.json"
    pid = fake_server_state(backend.socket_path)["pid"] if state_file.exists() else None
    try:
        backend.kill_server()
    finally:
        if pid and pid_alive(pid) and "server" in cmdline(pid):
            os.kill(pid, signal.SIGKILL)


def run_create_stop_resume(backend: str, extra_env: dict[str, str]) -> None:
    env = {**SECRETS, **HARMLESS, **extra_env}
    mam(
        "session",
        "create",
        "--agent",
        "demo",
        "--role",
        "dev",
        "--session",
        "s1",
        "--backend",
        backend,
        env=env,
        check=True,
    )
    assert_clean(agent_environ("s1"))
    mam("session", "stop", "--session", "s1", env=env, check=True)
    mam("session", "resume", "--session", "s1", env=env, check=True)
    assert_clean(agent_environ("s1"))
    mam("session", "stop", "--session", "s1", env=env, check=True)


def test_tmux_agent_inherits_no_secret(workspace: Workspace, tmux_server: Any) -> None:
    run_create_stop_resume("tmux", {})


def test_herdr_agent_inherits_no_secret(workspace: Workspace, herdr_server: str) -> None:
    run_create_stop_resume("herdr", {"HERDR_SESSION_NAME": herdr_server})


def test_gemini_pane_gets_no_ci_variable(workspace: Workspace, tmux_server: Any, fake_agents_on_path: Path) -> None:
    """gemini 0.61.0 leaves its terminal UI (and exits) when CI is set: its pane never inherits it."""
    env = {"CI": "true", "DEBIAN_FRONTEND": "noninteractive", "MAM_TEST_MARKER": "kept"}
    mam("session", "create", "--agent", "gemini", "--role", "dev", "--session", "g1", env=env, check=True)
    row = next(r for r in mam_json("session", "status") if r["name"] == "g1")
    seen = environ_of(row["pane_pid"])
    assert "CI" not in seen and "DEBIAN_FRONTEND" not in seen
    assert seen["MAM_TEST_MARKER"] == "kept"
    mam("session", "stop", "--session", "g1", env=env, check=True)
