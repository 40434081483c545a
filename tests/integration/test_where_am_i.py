"""Telling a person where they are: outside a workspace nothing is created, `mam status`, typos, `.mam.env` keys."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from tests.helpers.mamcli import MAM

NOT_A_WORKSPACE = (
    "not a mam workspace (no .mam/ or .mam.env here or above): run deploy/install.sh DIR, or pass --workspace"
)

NEEDS_A_WORKSPACE = [
    ("job", "delegate", "--target", "dev-1", "--brief", "hello"),
    ("session", "create", "--agent", "demo", "--role", "developer", "--session", "dev-1"),
    ("session", "status"),
    ("status",),
    ("session", "stop", "--session", "dev-1"),
    ("job", "list"),
    ("job", "status", "j-0123456789ab"),
    ("broker", "start"),
    ("doctor",),
    ("config",),
    ("budget",),
    ("top", "--snapshot"),
    ("tail", "--job", "j-0123456789ab"),
    ("monitor",),
]


def run_in(folder: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k != "MAM_WORKSPACE"}
    return subprocess.run([MAM, *args], cwd=folder, env=env, capture_output=True, text=True, timeout=60)


@pytest.mark.parametrize("args", NEEDS_A_WORKSPACE, ids=lambda a: " ".join(a[:2]))
def test_outside_a_workspace_exits_2_and_creates_nothing(tmp_path: Path, args: tuple[str, ...]) -> None:
    nowhere = tmp_path / "nowhere"
    nowhere.mkdir()
    r = run_in(nowhere, *args)
    assert r.returncode == 2, (r.stdout, r.stderr)
    assert r.stderr.strip() == f"mam: error: {NOT_A_WORKSPACE}"
    assert list(nowhere.iterdir()) == []
    assert not (tmp_path / ".mam").exists()


def test_an_explicit_workspace_folder_is_still_taken(tmp_path: Path) -> None:
    empty = tmp_path / "fresh"
    empty.mkdir()
    r = run_in(tmp_path, "--workspace", str(empty), "status")
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "no sessions"


def test_status_is_session_status(tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    (ws / ".mam").mkdir(parents=True, mode=0o700)
    short, long = run_in(ws, "status", "--json"), run_in(ws, "session", "status", "--json")
    assert short.returncode == long.returncode == 0, short.stderr
    assert short.stdout == long.stdout == "[]\n"
    assert "--json" in run_in(ws, "status", "--help").stdout


@pytest.mark.parametrize(("typo", "meant"), [("sesion", "session"), ("jbo", "job"), ("doctr", "doctor")])
def test_a_top_level_typo_suggests_the_command(tmp_path: Path, typo: str, meant: str) -> None:
    nowhere = tmp_path / "nowhere"
    nowhere.mkdir()
    r = run_in(nowhere, typo)
    assert r.returncode == 2
    assert f"No such command '{typo}'. Did you mean '{meant}'?" in r.stderr
    assert list(nowhere.iterdir()) == []


def test_nothing_like_any_command_gets_no_guess(tmp_path: Path) -> None:
    r = run_in(tmp_path, "xyzzy")
    assert r.returncode == 2
    assert "No such command 'xyzzy'." in r.stderr and "Did you mean" not in r.stderr


@pytest.mark.parametrize(
    "args",
    [("status",), ("session", "status"), ("config",), ("budget",), ("top", "--snapshot")],
    ids=" ".join,
)
def test_an_unknown_env_key_is_warned_once_with_the_closest_key(tmp_path: Path, args: tuple[str, ...]) -> None:
    ws = tmp_path / "ws"
    ws.mkdir()
    env_file = ws / ".mam.env"
    env_file.write_text("MAM_HEARTBEAT_SS=30\n")
    env_file.chmod(0o600)
    r = run_in(ws, *args)
    assert r.returncode == 0, r.stderr
    warnings = [line for line in r.stderr.splitlines() if "MAM_HEARTBEAT_SS" in line]
    assert warnings == [f"mam: warning: {env_file}:1: unknown key MAM_HEARTBEAT_SS (did you mean MAM_HEARTBEAT_S?)"]
