"""`mam doctor` checks what goes wrong in a first hour: tmux, each agent CLI on PATH (version or
missing), panes whose agent died, the broker, and a `.mam.env` others may write (a failed check,
not a refusal to run), all in --json too."""

from __future__ import annotations

import json
import os
import shutil
import signal
import sys
from pathlib import Path
from typing import Any

from mam.store.registry import Registry
from mam.store.sessions import SessionRow, SessionStatus
from mam.workspace import Workspace
from tests.helpers.jobs import create_demo
from tests.helpers.mamcli import mam


def doctor(env: dict[str, str] | None = None) -> tuple[int, dict[str, dict[str, str]]]:
    proc = mam("doctor", "--json", env=env)
    report = json.loads(proc.stdout)
    return proc.returncode, {c["name"]: c for c in report["checks"]}


def path_with(bin_dir: Path) -> str:
    return os.pathsep.join([str(bin_dir), str(Path(sys.executable).parent), "/usr/bin", "/bin"])


def test_tmux_and_each_agent_cli_version_or_missing(workspace: Workspace, tmp_path: Path) -> None:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    claude = bin_dir / "claude"
    claude.write_text("#!/bin/sh\n[ \"$1\" = --version ] && echo '2.1.332 (Claude Code)'\n")
    claude.chmod(0o755)
    code, checks = doctor({"PATH": path_with(bin_dir)})
    assert code == 0, checks
    assert checks["tmux"]["status"] == "ok" and checks["tmux"]["detail"].startswith("tmux ")
    assert checks["agent claude"] == {
        "name": "agent claude",
        "status": "ok",
        "detail": f"2.1.332 (Claude Code) (verified with mam) ({claude})",
    }
    codex = checks["agent codex"]
    assert codex["status"] == "warn" and "codex not on PATH" in codex["detail"] and "@openai/codex" in codex["detail"]
    assert "agent demo" not in checks
    assert "agents" not in checks  # one CLI found: no pointer to the demo agent
    # A session of the workspace runs codex: its CLI missing is a failure.
    registry = Registry(workspace)
    try:
        registry.add_session(
            SessionRow(
                name="cx",
                agent="codex",
                role="dev",
                backend="tmux",
                server="s",
                cwd=str(workspace.root),
                status=SessionStatus.STOPPED,
            )
        )
    finally:
        registry.close()
    code, checks = doctor({"PATH": path_with(bin_dir)})
    assert code == 1 and checks["agent codex"]["status"] == "fail"


def test_no_agent_cli_found_points_to_the_demo_agent(workspace: Workspace, tmp_path: Path) -> None:
    bin_dir = tmp_path / "bin"  # tmux only: no agent CLI on the panes' PATH
    bin_dir.mkdir()
    tmux = shutil.which("tmux")
    assert tmux is not None
    (bin_dir / "tmux").symlink_to(tmux)
    code, checks = doctor({"PATH": os.pathsep.join([str(bin_dir), str(Path(sys.executable).parent)])})
    assert code == 0, checks
    assert all(c["status"] == "warn" for name, c in checks.items() if name.startswith("agent "))
    hint = checks["agents"]
    assert hint["status"] == "warn" and "--agent demo" in hint["detail"], hint
    assert '"Trying it without an agent CLI"' in hint["detail"]
    readme = (Path(__file__).resolve().parents[2] / "README.md").read_text()
    assert "\n### Trying it without an agent CLI\n" in readme


def test_a_cli_at_another_version_than_verified_is_a_warning_naming_what_reads_its_screen(
    workspace: Workspace, tmp_path: Path
) -> None:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    gemini = bin_dir / "gemini"
    gemini.write_text("#!/bin/sh\n[ \"$1\" = --version ] && echo '0.62.1'\n")
    gemini.chmod(0o755)
    code, checks = doctor({"PATH": path_with(bin_dir)})
    assert code == 0, checks  # a warning: the CLI may still work
    detail = checks["agent gemini"]["detail"]
    assert checks["agent gemini"]["status"] == "warn", detail
    assert detail.startswith(f"0.62.1 ({gemini}), mam was verified with 0.61.0: mam reads its screen for ready"), detail
    assert "permission prompts" in detail and "[Pasted Text:" in detail


def test_a_session_whose_agent_died_fails(workspace: Workspace, tmux_server: Any, poll) -> None:
    alive = create_demo("alive")
    dead = create_demo("dead")
    code, checks = doctor()
    assert code == 0 and checks["session dead"]["status"] == "ok", checks
    os.kill(dead["pane_pid"], signal.SIGKILL)
    poll(lambda: doctor()[1]["session dead"]["status"] == "fail", timeout=10, message="doctor never saw it die")
    code, checks = doctor()
    assert code == 1
    assert (
        f"demo exited with status {128 + signal.SIGKILL} (pane {dead['pane_id']} is dead)"
        in (checks["session dead"]["detail"])
        or f"demo exited (pane {dead['pane_id']} is dead)" in checks["session dead"]["detail"]
    )
    assert "mam session resume --session dead" in checks["session dead"]["detail"]
    assert checks["session alive"]["status"] == "ok" and str(alive["pane_pid"]) in checks["session alive"]["detail"]


def test_a_group_writable_env_file_is_a_failed_check_not_a_refusal(workspace: Workspace) -> None:
    env_file = workspace.env_file
    env_file.write_text("MAM_HEARTBEAT_S=30\n")
    env_file.chmod(0o620)
    assert mam("status").returncode == 2  # every other command refuses it
    proc = mam("doctor")
    assert proc.returncode == 1, proc.stderr
    assert f"fail  settings file: refusing settings file {env_file}: mode 0620 lets group or others write it" in (
        proc.stdout
    )
    code, checks = doctor()
    assert code == 1 and checks["settings file"]["status"] == "fail"
    assert "tmux" in checks and "broker" in checks  # the rest is still checked


def test_a_configured_broker_that_does_not_answer_fails(workspace: Workspace) -> None:
    from tests.helpers.brokers import free_port

    code, checks = doctor({"MQTT_BROKER": "127.0.0.1", "MQTT_PORT": str(free_port())})
    assert code == 1 and checks["broker"]["status"] == "fail" and "cannot connect" in checks["broker"]["detail"]
