"""The BASH_ENV mam gives a hermes session, run by a real bash as hermes 0.19's terminal tool
runs its snapshot shell (`bash -l -c`), with a login profile that resets PATH."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

from mam.agents import get_adapter
from mam.agents.base import LaunchContext
from mam.agents.hermes import BASH_ENV_FILE


def login_home(tmp_path: Path) -> Path:
    home = tmp_path / "home"
    home.mkdir(exist_ok=True)
    (home / ".profile").write_text(
        "PATH=/usr/bin:/bin\nexport PATH\n", encoding="utf-8"
    )  # as Debian's /etc/profile does
    return home


def hermes_env(tmp_path: Path, pane: dict[str, str]) -> dict[str, str]:
    ctx = LaunchContext(session="s", cwd=str(tmp_path), state_dir=tmp_path / "state", env=pane)
    return {**pane, **get_adapter("hermes").session_options(ctx).env}


def bash(env: dict[str, str], script: str, *, login: bool = True) -> str:
    argv = ["bash", "-l", "-c", script] if login else ["bash", "-c", script]
    run = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=60, check=True)
    return run.stdout


def test_a_login_shell_keeps_the_panes_path_first_once(tmp_path: Path) -> None:
    keep = tmp_path / "pane bin $x"  # a space and a dollar: quoted, never expanded
    keep.mkdir()
    tool = keep / "only-in-pane"
    tool.write_text("#!/bin/sh\necho found\n", encoding="utf-8")
    tool.chmod(0o755)
    pane = {"HOME": str(login_home(tmp_path)), "PATH": f"{keep}{os.pathsep}/usr/bin{os.pathsep}/bin"}
    env = hermes_env(tmp_path, pane)
    assert Path(env["BASH_ENV"]) == tmp_path / "state" / BASH_ENV_FILE
    assert Path(env["BASH_ENV"]).stat().st_mode & 0o777 == 0o600
    assert bash(env, "only-in-pane") == "found\n"
    # a bash started inside that shell (PATH already starts with the pane's) adds nothing
    assert bash(env, "bash -c 'printf %s \"$PATH\"'") == f"{pane['PATH']}{os.pathsep}/usr/bin{os.pathsep}/bin"


def test_without_it_the_login_profile_loses_the_panes_path(tmp_path: Path) -> None:
    """What the test above guards against: the same login shell without mam's BASH_ENV."""
    keep = tmp_path / "pane-bin"
    keep.mkdir()
    pane = {"HOME": str(login_home(tmp_path)), "PATH": f"{keep}{os.pathsep}/usr/bin{os.pathsep}/bin"}
    assert str(keep) not in bash(pane, 'printf %s "$PATH"').split(os.pathsep)


def test_a_bash_env_the_pane_had_still_runs_and_its_own_is_not_run_twice(tmp_path: Path) -> None:
    theirs = tmp_path / "theirs.sh"
    theirs.write_text("echo theirs\n", encoding="utf-8")
    home = login_home(tmp_path)
    env = hermes_env(tmp_path, {"HOME": str(home), "PATH": "/usr/bin:/bin", "BASH_ENV": str(theirs)})
    assert bash(env, "true", login=False) == "theirs\n"
    # a resume run from inside the session: the pane's BASH_ENV is mam's own file, not chained to itself
    again = hermes_env(tmp_path, {"HOME": str(home), "PATH": "/usr/bin:/bin", "BASH_ENV": env["BASH_ENV"]})
    assert again["BASH_ENV"] == env["BASH_ENV"]
    assert bash(again, "echo ok", login=False) == "ok\n"
