"""deploy/*.sh end to end: a real venv, a real pip install, real files in temp workspaces.

The one slow step (venv + pip, ~12 s) runs once per test run, shared through a lock (with the real
claude test of the skill scripts; this module's tests are one xdist group, so one worker runs them):
`installed` installs into workspace A twice and records snapshots. Tests that change a workspace work
on a copy of A (its venv included, so they pay no second pip install).
Every script runs from a temp clone with fake skills, so the repo itself is never written to.
"""

from __future__ import annotations

import hashlib
import importlib.util
import json
import os
import shutil
import stat
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

import mam
from mam.util.flock import FileLock

REPO = Path(__file__).resolve().parents[2]
# One worker runs this module (`--dist loadgroup`): the others never wait on the shared install's lock.
pytestmark = pytest.mark.xdist_group("deploy")
BASE_PYTHON = os.path.realpath(getattr(sys, "_base_executable", sys.executable))
ENV_PREFIXES = ("MQTT_", "MAM_", "HERDR_", "TMUX", "PYTHON", "VIRTUAL_ENV")
SCRIPTS = ("install.sh", "update.sh", "remove.sh", "generate-env.sh", "install_mam.sh")
USER_GITIGNORE = "node_modules/\n*.log"  # no final newline on purpose
FAKE_SKILLS = {
    "multi-agent-mux-fake-a/SKILL.md": "# fake skill a\n",
    "multi-agent-mux-fake-a/scripts/run_a.sh": "#!/bin/sh\nexec mam --version\n",
    "multi-agent-mux-fake-b/SKILL.md": "# fake skill b\n",
}

Snapshot = dict[str, list[object]]


# -- helpers ------------------------------------------------------------------------------------------


def snapshot(root: Path, *, skip: tuple[str, ...] = ()) -> Snapshot:
    """Every file, folder and link under root: kind, mode, mtime (ns) and content hash."""
    seen: Snapshot = {}
    for folder, dirs, files in os.walk(root):
        rel_folder = Path(folder).relative_to(root)
        dirs[:] = [d for d in dirs if (rel_folder / d).as_posix() not in skip]
        for name in dirs + files:
            path = Path(folder) / name
            st = path.lstat()
            if stat.S_ISLNK(st.st_mode):
                kind, digest = "link", os.readlink(path)
            elif stat.S_ISDIR(st.st_mode):
                kind, digest = "dir", ""
            else:
                kind, digest = "file", hashlib.sha256(path.read_bytes()).hexdigest()
            seen[(rel_folder / name).as_posix()] = [kind, stat.S_IMODE(st.st_mode), st.st_mtime_ns, digest]
    return seen


def contents(root: Path) -> dict[str, str]:
    """Relative path -> text of every file under root outside .venv (folders implied)."""
    found = {}
    for path in sorted(root.rglob("*")):
        rel = path.relative_to(root)
        if path.is_file() and rel.parts[0] != ".venv":
            found[rel.as_posix()] = path.read_text()
    return found


def script_env(home: Path, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(ENV_PREFIXES)}
    home.mkdir(parents=True, exist_ok=True)
    env.update(
        HOME=str(home), XDG_CACHE_HOME=str(home / ".cache"), XDG_CONFIG_HOME=str(home / ".config"), PYTHON=BASE_PYTHON
    )
    env.update(extra)
    return env


def run(script: Path, *args: str, env: dict[str, str], cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["bash", str(script), *args],
        env=env,
        cwd=cwd or script.parent,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )


def make_clone(dest: Path) -> Path:
    """A source tree like a clone of mam: the repo's skills (whatever exists now) plus fake ones."""
    ignore = shutil.ignore_patterns("__pycache__", "*.pyc", "*.egg-info")
    dest.mkdir(parents=True)
    for name in (
        "pyproject.toml",
        ".mam.env.example",
        *[p.name for p in REPO.glob("README*")],
        *[p.name for p in REPO.glob("LICENSE*")],
    ):
        shutil.copy2(REPO / name, dest / name)
    shutil.copytree(REPO / "mam", dest / "mam", ignore=ignore)
    shutil.copytree(REPO / "deploy", dest / "deploy", ignore=ignore)
    if (REPO / "skills").is_dir():
        shutil.copytree(REPO / "skills", dest / "skills", ignore=ignore)
    for rel, text in FAKE_SKILLS.items():
        path = dest / "skills" / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
        if rel.endswith(".sh"):
            path.chmod(0o755)
    return dest


def copy_workspace(src: Path, dest: Path, *, link_venv: bool = True) -> Path:
    """A copy of an installed workspace, venv included (its scripts still run through src's python).

    With `link_venv` the venv's files are hard links (fast): only for tests whose scripts leave the
    venv alone or delete it, never for ones that pip-install into it.
    """
    shutil.copytree(src, dest, symlinks=True, ignore=lambda folder, _names: [".venv"] if Path(folder) == src else [])
    shutil.copytree(src / ".venv", dest / ".venv", symlinks=True, copy_function=os.link if link_venv else shutil.copy2)
    return dest


@dataclass
class Installed:
    clone: Path
    ws: Path
    home: Path
    before: Snapshot
    after_first: Snapshot
    after_second: Snapshot
    clone_before: Snapshot
    clone_after: Snapshot
    first: dict[str, object]
    second: dict[str, object]

    def env(self, **extra: str) -> dict[str, str]:
        return script_env(self.home, **extra)

    def script(self, name: str, clone: Path | None = None) -> Path:
        return (clone or self.clone) / "deploy" / name


def _install_once(root: Path) -> dict[str, object]:
    clone = make_clone(root / "clone")
    ws = root / "ws-a"
    (ws / ".agents").mkdir(parents=True)
    (ws / ".agents" / "README.md").write_text("the user's own file in .agents/\n")
    (ws / ".gitignore").write_text(USER_GITIGNORE)
    (ws / "notes.txt").write_text("user notes\n")
    home = root / "home"
    env = script_env(home)
    before, clone_before = snapshot(ws), snapshot(clone)
    first = run(clone / "deploy" / "install.sh", str(ws), env=env, cwd=root)
    after_first = snapshot(ws)
    second = run(clone / "deploy" / "install.sh", env=env, cwd=ws)  # no argument: the current folder
    return {
        "clone": str(clone), "ws": str(ws), "home": str(home),
        "before": before, "after_first": after_first, "after_second": snapshot(ws),
        "clone_before": clone_before, "clone_after": snapshot(clone),
        "first": {"rc": first.returncode, "out": first.stdout, "err": first.stderr},
        "second": {"rc": second.returncode, "out": second.stdout, "err": second.stderr},
    }  # fmt: skip


@pytest.fixture(scope="module")
def installed(tmp_path_factory: pytest.TempPathFactory, request: pytest.FixtureRequest) -> Installed:
    """Workspace A after two runs of install.sh, built once per test run (shared by xdist workers)."""
    base = tmp_path_factory.getbasetemp()
    if hasattr(request.config, "workerinput"):
        base = base.parent  # the folder every xdist worker of this run shares
    root = base / "deploy-installed"
    results = base / "deploy-installed.json"
    with FileLock(str(base / "deploy-installed.lock")):
        if not results.exists():
            shutil.rmtree(root, ignore_errors=True)
            root.mkdir()
            data = _install_once(root)
            tmp = results.with_suffix(".tmp")
            tmp.write_text(json.dumps(data))
            tmp.replace(results)
    data = json.loads(results.read_text())
    for key in ("clone", "ws", "home"):
        data[key] = Path(data[key])
    return Installed(**data)


@pytest.fixture
def ws_copy(installed: Installed, tmp_path: Path) -> Path:
    assert installed.first["rc"] == 0, f"the shared install failed:\n{installed.first['out']}\n{installed.first['err']}"
    return copy_workspace(installed.ws, tmp_path / "ws")


def skill_files(clone: Path, prefix: str = ".agents/skills/") -> dict[str, str]:
    """What install should copy: every file of the clone's skills/."""
    return {prefix + rel: text for rel, text in contents(clone / "skills").items()}


def deploy_helper():
    """deploy/_deploy.py as a module (it is a script of the deploy folder, not part of the package)."""
    spec = importlib.util.spec_from_file_location("mam_deploy_helper", REPO / "deploy" / "_deploy.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def fake_venv_script(ws: Path, first_line: str, *, system_site: str | None = None) -> Path:
    """WS/.venv with a pyvenv.cfg and a bin/mam whose first line is `first_line` ({venv} -> the venv)."""
    venv = ws / ".venv"
    (venv / "bin").mkdir(parents=True)
    cfg = "home = /usr/bin\n" + (f"include-system-site-packages = {system_site}\n" if system_site else "")
    (venv / "pyvenv.cfg").write_text(cfg + "version = 3.11.7\n")
    script = venv / "bin" / "mam"
    script.write_text(first_line.format(venv=venv) + "\nimport sys\n")
    script.chmod(0o755)
    return script


# -- the first install ----------------------------------------------------------------------------------


def test_install_succeeds_and_mam_runs_from_the_workspace_venv(installed: Installed):
    assert installed.first["rc"] == 0, installed.first
    ws = installed.ws
    r = subprocess.run(
        [str(ws / ".venv/bin/mam"), "--version"], capture_output=True, text=True, timeout=60, check=False
    )
    assert r.returncode == 0 and r.stdout.strip() == f"mam, version {mam.__version__}"
    # Not editable: the package lives in the venv, so the clone may move or go away.
    r = subprocess.run(
        [str(ws / ".venv/bin/python"), "-I", "-c", "import mam; print(mam.__file__)"],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    assert Path(r.stdout.strip()).is_relative_to(ws / ".venv")
    assert (ws / ".venv/.mam-source-hash").read_text().strip() == json.loads(
        (ws / ".mam/install-manifest.json").read_text()
    )["source_hash"]


def test_the_workspace_mam_starts_python_with_no_site_and_install_records_it(installed: Installed):
    ws = installed.ws
    first_line = f"#!{ws}/.venv/bin/python -S"
    assert (ws / ".venv/bin/mam").read_text().splitlines()[0] == first_line
    manifest = json.loads((ws / ".mam/install-manifest.json").read_text())
    assert manifest["script"] == {"path": ".venv/bin/mam", "first_line": first_line}
    assert ".venv/bin/mam: starts Python with -S" in str(installed.first["out"])
    assert ".venv/bin/mam" not in str(installed.second["out"])  # said once, when written


def test_every_kind_of_command_runs_under_no_site_a_delegation_too(installed: Installed, ws_copy: Path, tmux_server):
    """The -S script runs the lean front ends (an event, a delegation), click's commands and their help; a demo
    agent's `mam event started` / `completed` are this venv's -S script too (the venv's bin leads its PATH)."""
    env = installed.env(MAM_TMUX_SERVER=tmux_server.name)
    mam_bin = str(ws_copy / ".venv" / "bin" / "mam")

    def mam_cmd(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [mam_bin, "--workspace", str(ws_copy), *args],
            env=env, cwd=ws_copy, capture_output=True, text=True, timeout=120, check=False,
        )  # fmt: skip

    assert (ws_copy / ".venv/bin/mam").read_text().startswith(f"#!{installed.ws}/.venv/bin/python -S\n")
    version = mam_cmd("--version")
    assert version.returncode == 0 and version.stdout == f"mam, version {mam.__version__}\n", version.stderr
    helped = mam_cmd("job", "delegate", "--help")
    assert helped.returncode == 0 and helped.stdout.startswith("Usage: mam job delegate [OPTIONS]"), helped.stderr
    unknown = mam_cmd("event", "progress", "--job", "job-0123456789abcdef", "--message", "m")
    assert unknown.returncode == 5 and "no job 'job-0123456789abcdef'" in unknown.stderr, unknown.stderr
    status = mam_cmd("session", "status", "--json")
    assert status.returncode == 0 and json.loads(status.stdout) == [], status.stderr
    made = mam_cmd("session", "create", "--agent", "demo", "--role", "dev", "--session", "dev-1", "--json")
    assert made.returncode == 0, made.stderr
    try:
        done = mam_cmd("job", "delegate", "--target", "tmux:dev-1", "--brief", "say hello", "--json")
        assert done.returncode == 0, done.stdout + done.stderr
        record = json.loads(done.stdout)
        assert record["state"] == "completed" and record["last_seq"] >= 2, record
    finally:
        mam_cmd("session", "stop", "--session", "dev-1")
        mam_cmd("node", "stop")


def test_no_site_is_added_once_only_to_a_plain_first_line_of_a_venv_without_system_packages(tmp_path: Path, capsys):
    helper = deploy_helper()
    ws = tmp_path / "plain"
    script = fake_venv_script(ws, "#!{venv}/bin/python", system_site="false")
    record = helper.script_without_site(ws)
    assert script.read_text() == f"#!{ws}/.venv/bin/python -S\nimport sys\n"
    assert record == {"path": ".venv/bin/mam", "first_line": f"#!{ws}/.venv/bin/python -S"}
    assert stat.S_IMODE(script.stat().st_mode) == 0o755
    before = script.stat().st_mtime_ns
    assert helper.script_without_site(ws) == record and script.stat().st_mtime_ns == before  # idempotent
    assert capsys.readouterr().out.count("starts Python with -S") == 1

    # A venv that reads the system's site-packages keeps pip's line (and loses an -S it had).
    ws = tmp_path / "system"
    script = fake_venv_script(ws, "#!{venv}/bin/python -S", system_site="true")
    assert helper.script_without_site(ws)["first_line"] == f"#!{ws}/.venv/bin/python"
    assert script.read_text().splitlines()[0] == f"#!{ws}/.venv/bin/python"

    # A line over 127 bytes with -S, or not `#!/path/to/python`: left as it is.
    ws = tmp_path / ("x" * (127 - len(str(tmp_path)) - len("/#!/.venv/bin/python") - 1))
    script = fake_venv_script(ws, "#!{venv}/bin/python")
    assert len(script.read_text().splitlines()[0]) == 126
    assert helper.script_without_site(ws)["first_line"] == f"#!{ws}/.venv/bin/python"
    for line in ("#!/usr/bin/env python", "#!/bin/sh", "#!{venv}/bin/python -E"):
        ws = tmp_path / f"other-{len(line)}"
        script = fake_venv_script(ws, line)
        helper.script_without_site(ws)
        assert script.read_text().splitlines()[0] == line.format(venv=ws / ".venv")
    assert helper.script_without_site(tmp_path / "no-venv") == {}


def test_install_copies_the_skills(installed: Installed):
    copied = {k: v for k, v in contents(installed.ws).items() if k.startswith(".agents/skills/")}
    assert copied == skill_files(installed.clone)
    for script in (installed.clone / "skills").glob("*/scripts/*.sh"):
        target = installed.ws / ".agents/skills" / script.relative_to(installed.clone / "skills")
        assert os.access(target, os.X_OK), target


def test_install_writes_mam_env_from_the_example(installed: Installed):
    env_file = installed.ws / ".mam.env"
    assert env_file.read_text() == (REPO / ".mam.env.example").read_text()
    assert stat.S_IMODE(env_file.stat().st_mode) == 0o600


def test_install_adds_gitignore_lines_once_and_keeps_the_rest(installed: Installed):
    text = (installed.ws / ".gitignore").read_text()
    assert text.startswith(USER_GITIGNORE + "\n")
    lines = [line.strip() for line in text.splitlines()]
    for wanted in (".venv", ".mam/", ".mam.env"):
        assert lines.count(wanted) == 1, text
    assert lines[:2] == ["node_modules/", "*.log"]


def test_install_adds_nothing_else(installed: Installed):
    added = set(installed.after_first) - set(installed.before)
    outside_venv = {p for p in added if not p.startswith(".venv")}
    skills = {f".agents/skills/{rel}" for rel in snapshot(installed.clone / "skills")}
    assert outside_venv == {
        ".mam", ".mam/install-manifest.json", ".mam/bin", ".mam/bin/mam", ".mam.env", ".agents/skills", *skills
    }  # fmt: skip
    assert installed.after_first["notes.txt"] == installed.before["notes.txt"]
    assert installed.after_first[".agents/README.md"] == installed.before[".agents/README.md"]


def test_second_run_changes_no_file(installed: Installed):
    assert installed.second["rc"] == 0, installed.second
    assert "up to date" in str(installed.second["out"])
    assert "pip-installing" not in str(installed.second["out"])
    outside = {k: v for k, v in installed.after_second.items() if not k.startswith(".venv")}
    assert outside == {k: v for k, v in installed.after_first.items() if not k.startswith(".venv")}
    # Inside .venv too: not reinstalled, not touched (hashes, modes and mtimes of every file).
    assert installed.after_second == installed.after_first


def test_install_leaves_the_clone_untouched(installed: Installed):
    assert installed.clone_after == installed.clone_before  # no build/, no *.egg-info in the clone


def test_install_reports_herdr_as_optional(installed: Installed):
    if shutil.which("herdr") is None:
        assert "herdr not found (optional" in str(installed.first["out"])


def test_gitignore_lines_already_there_in_another_spelling_are_not_added(installed: Installed, ws_copy: Path):
    (ws_copy / ".gitignore").write_text("/.venv/\n.mam\n")
    r = run(installed.script("install.sh"), str(ws_copy), env=installed.env())
    assert r.returncode == 0, r.stderr
    text = (ws_copy / ".gitignore").read_text()
    assert text.startswith("/.venv/\n.mam\n\n")
    assert [line for line in text.splitlines() if not line.startswith("#")] == ["/.venv/", ".mam", "", ".mam.env"]


def test_a_foreign_broken_venv_is_left_alone(installed: Installed, tmp_path: Path):
    ws = tmp_path / "ws"
    (ws / ".venv").mkdir(parents=True)
    (ws / ".venv" / "keep-me").write_text("not a venv\n")
    r = run(installed.script("install.sh"), str(ws), env=installed.env())
    assert r.returncode == 1
    assert "is not a working Python venv" in r.stderr
    assert (ws / ".venv" / "keep-me").read_text() == "not a venv\n"
    assert list(ws.iterdir()) == [ws / ".venv"]


# -- .mam.env on later installs ---------------------------------------------------------------------------


def test_existing_mam_env_is_kept(installed: Installed, ws_copy: Path):
    env_file = ws_copy / ".mam.env"
    env_file.write_text("MQTT_BROKER=broker.internal\n")
    before = env_file.stat().st_mtime_ns
    r = run(installed.script("install.sh"), str(ws_copy), env=installed.env())
    assert r.returncode == 0, r.stderr
    assert env_file.read_text() == "MQTT_BROKER=broker.internal\n"
    assert env_file.stat().st_mtime_ns == before
    assert "pip-installing" not in r.stdout  # the copied venv is current


def test_legacy_env_is_copied_and_kept(installed: Installed, ws_copy: Path):
    (ws_copy / ".mam.env").unlink()
    legacy = ws_copy / ".env"
    legacy.write_text("MQTT_BROKER=legacy.example\nMQTT_PORT=2883\n")
    r = run(installed.script("install.sh"), str(ws_copy), env=installed.env())
    assert r.returncode == 0, r.stderr
    assert (ws_copy / ".mam.env").read_text() == legacy.read_text() == "MQTT_BROKER=legacy.example\nMQTT_PORT=2883\n"
    assert stat.S_IMODE((ws_copy / ".mam.env").stat().st_mode) == 0o600
    assert "legacy .env" in r.stdout


def test_generate_env_creates_keeps_and_forces_with_a_backup(installed: Installed, tmp_path: Path):
    ws = tmp_path / "plain"
    ws.mkdir()
    script, env = installed.script("generate-env.sh"), installed.env()
    example = (REPO / ".mam.env.example").read_text()
    assert run(script, str(ws), env=env).returncode == 0
    assert (ws / ".mam.env").read_text() == example
    assert stat.S_IMODE((ws / ".mam.env").stat().st_mode) == 0o600
    (ws / ".mam.env").write_text("MQTT_PORT=2001\n")
    r = run(script, str(ws), env=env)
    assert r.returncode == 0 and "kept" in r.stdout
    assert (ws / ".mam.env").read_text() == "MQTT_PORT=2001\n"
    assert not (ws / ".mam.env.bak").exists()
    r = run(script, "--force", str(ws), env=env)
    assert r.returncode == 0, r.stderr
    assert (ws / ".mam.env").read_text() == example
    assert (ws / ".mam.env.bak").read_text() == "MQTT_PORT=2001\n"
    assert stat.S_IMODE((ws / ".mam.env.bak").stat().st_mode) == 0o600


# -- remove.sh ----------------------------------------------------------------------------------------


def test_remove_takes_out_exactly_what_install_added(installed: Installed, ws_copy: Path):
    user_files = {
        "user.txt": "mine\n",
        ".agents/other.txt": "mine too\n",
        ".agents/skills/someone-elses-skill/SKILL.md": "# not mam's\n",
        ".agents/skills/multi-agent-mux-fake-a/my-notes.md": "added inside a mam skill folder\n",
        ".mam/agent-sessions.db": "state\n",
    }
    for rel, text in user_files.items():
        (ws_copy / rel).parent.mkdir(parents=True, exist_ok=True)
        (ws_copy / rel).write_text(text)
    r = run(installed.script("remove.sh"), str(ws_copy), env=installed.env())
    assert r.returncode == 0, r.stderr
    before_install = {
        "notes.txt": "user notes\n",
        ".agents/README.md": "the user's own file in .agents/\n",
        ".gitignore": USER_GITIGNORE,
    }
    assert contents(ws_copy) == {**before_install, **user_files}
    assert not (ws_copy / ".venv").exists()
    assert not (ws_copy / ".agents/skills/multi-agent-mux-fake-b").exists()
    assert not (ws_copy / ".mam/install-manifest.json").exists()
    assert (ws_copy / ".mam").is_dir()


def test_remove_of_an_untouched_install_restores_the_workspace(installed: Installed, ws_copy: Path):
    r = run(installed.script("remove.sh"), env=installed.env(), cwd=ws_copy)  # no argument: the current folder
    assert r.returncode == 0, r.stderr
    after = snapshot(ws_copy)
    # Exactly the files from before install (same content and mode), plus the kept, now empty, .mam/.
    assert set(after) == set(installed.before) | {".mam"}
    for rel, (kind, mode, _mtime, digest) in installed.before.items():
        assert after[rel][0] == kind and after[rel][1] == mode and after[rel][3] == digest, rel


def test_remove_purge_deletes_state_but_keeps_a_changed_env(installed: Installed, ws_copy: Path):
    (ws_copy / ".mam.env").write_text("MQTT_BROKER=mine.example\n")
    (ws_copy / ".mam/jobs").mkdir()
    r = run(installed.script("remove.sh"), "--purge", str(ws_copy), env=installed.env())
    assert r.returncode == 0, r.stderr
    assert not (ws_copy / ".mam").exists()
    assert not (ws_copy / ".venv").exists()
    assert (ws_copy / ".mam.env").read_text() == "MQTT_BROKER=mine.example\n"
    assert "kept (it holds your settings)" in r.stdout


def test_remove_without_an_install_says_so(installed: Installed, tmp_path: Path):
    (tmp_path / "empty").mkdir()
    r = run(installed.script("remove.sh"), str(tmp_path / "empty"), env=installed.env())
    assert r.returncode == 1
    assert "nothing to remove" in r.stderr
    assert list((tmp_path / "empty").iterdir()) == []


def test_installed_skill_scripts_run_the_workspace_mam(installed: Installed, ws_copy: Path, tmp_path: Path):
    status = ws_copy / ".agents/skills/multi-agent-mux-status/scripts/status.sh"
    if not status.exists():
        pytest.skip("no multi-agent-mux-status skill in this clone yet")
    env = installed.env(MAM_TMUX_SERVER=f"mamtest-deploy-{tmp_path.name[-12:]}")
    r = subprocess.run(
        ["bash", str(status), "--json"], cwd=ws_copy, env=env, capture_output=True, text=True, timeout=60, check=False
    )
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout) == []


# -- update.sh ----------------------------------------------------------------------------------------


def test_update_reinstalls_refreshes_skills_and_keeps_settings(installed: Installed, tmp_path: Path):
    ws_copy = copy_workspace(installed.ws, tmp_path / "ws", link_venv=False)  # pip writes into this venv
    clone = shutil.copytree(installed.clone, tmp_path / "clone2", symlinks=True)
    skills = clone / "skills"
    (skills / "multi-agent-mux-fake-a/SKILL.md").write_text("# fake skill a, version 2\n")
    shutil.rmtree(skills / "multi-agent-mux-fake-b")
    (skills / "multi-agent-mux-fake-c").mkdir()
    (skills / "multi-agent-mux-fake-c/SKILL.md").write_text("# fake skill c\n")
    (ws_copy / ".mam.env").write_text("MAM_HEARTBEAT_S=12\n")
    (ws_copy / ".mam/agent-sessions.db").write_text("state\n")
    env_mtime = (ws_copy / ".mam.env").stat().st_mtime_ns

    r = run(clone / "deploy" / "update.sh", str(ws_copy), env=installed.env())
    assert r.returncode == 0, r.stdout + r.stderr
    assert "pip-installing" in r.stdout  # reinstalled even though the sources did not change
    copied = {k: v for k, v in contents(ws_copy).items() if k.startswith(".agents/skills/")}
    assert copied == skill_files(clone)
    assert copied[".agents/skills/multi-agent-mux-fake-a/SKILL.md"] == "# fake skill a, version 2\n"
    assert copied[".agents/skills/multi-agent-mux-fake-c/SKILL.md"] == "# fake skill c\n"
    assert not (ws_copy / ".agents/skills/multi-agent-mux-fake-b").exists()
    assert (ws_copy / ".mam.env").read_text() == "MAM_HEARTBEAT_S=12\n"
    assert (ws_copy / ".mam.env").stat().st_mtime_ns == env_mtime
    assert (ws_copy / ".mam/agent-sessions.db").read_text() == "state\n"
    manifest = json.loads((ws_copy / ".mam/install-manifest.json").read_text())
    assert sorted(manifest["skills"]) == sorted(p.name for p in skills.iterdir())
    assert "multi-agent-mux-fake-b" not in manifest["skills"]
    assert manifest["venv"] == "created"
    r = subprocess.run(
        [str(ws_copy / ".venv/bin/python"), "-I", "-c", "import mam; print(mam.__file__)"],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    assert Path(r.stdout.strip()).is_relative_to(ws_copy / ".venv")
    r = subprocess.run(
        [str(ws_copy / ".venv/bin/mam"), "--version"], capture_output=True, text=True, timeout=60, check=False
    )
    assert r.returncode == 0 and mam.__version__ in r.stdout
    # pip wrote the script anew (`#!<python>`); update put -S back on its first line.
    first_line = f"#!{ws_copy.resolve()}/.venv/bin/python -S"
    assert (ws_copy / ".venv/bin/mam").read_text().splitlines()[0] == first_line
    assert manifest["script"]["first_line"] == first_line


def test_update_without_an_install_says_so(installed: Installed, tmp_path: Path):
    (tmp_path / "empty").mkdir()
    r = run(installed.script("update.sh"), str(tmp_path / "empty"), env=installed.env())
    assert r.returncode == 1
    assert "not installed" in r.stderr and "install.sh" in r.stderr


# -- prerequisites and usage ----------------------------------------------------------------------------


def path_without(tmp_path: Path, *names: str) -> str:
    """A PATH holding links to every program on the current PATH except `names`."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for folder in os.environ["PATH"].split(os.pathsep):
        if not os.path.isdir(folder):
            continue
        for entry in os.scandir(folder):
            if entry.name in names or (bin_dir / entry.name).exists():
                continue
            if entry.is_file() and os.access(entry.path, os.X_OK):
                (bin_dir / entry.name).symlink_to(entry.path)
    return str(bin_dir)


def test_missing_tmux_is_a_clear_error_and_changes_nothing(installed: Installed, tmp_path: Path):
    ws = tmp_path / "ws"
    ws.mkdir()
    env = installed.env(PATH=path_without(tmp_path, "tmux"))
    r = run(installed.script("install.sh"), str(ws), env=env)
    assert r.returncode == 1
    assert "tmux was not found" in r.stderr
    assert "apt-get install tmux" in r.stderr and "brew install tmux" in r.stderr
    assert list(ws.iterdir()) == []


def test_old_python_is_a_clear_error(installed: Installed, tmp_path: Path):
    fake = tmp_path / "python3.8"
    fake.write_text("#!/bin/sh\necho 3.8.10\nexit 3\n")
    fake.chmod(0o755)
    ws = tmp_path / "ws"
    ws.mkdir()
    r = run(installed.script("install.sh"), str(ws), env=installed.env(PYTHON=str(fake)))
    assert r.returncode == 1
    assert "Python >= 3.10 is required" in r.stderr and "3.8.10" in r.stderr
    r = run(installed.script("install.sh"), str(ws), env=installed.env(PYTHON="no-such-python"))
    assert r.returncode == 1 and "PYTHON=/path/to/python3" in r.stderr
    assert list(ws.iterdir()) == []


def test_a_missing_workspace_is_created_only_once_prerequisites_pass(installed: Installed, tmp_path: Path):
    r = run(installed.script("install.sh"), str(tmp_path / "nope"), env=installed.env(PYTHON="no-such-python"))
    assert r.returncode == 1 and not (tmp_path / "nope").exists()
    r = run(installed.script("remove.sh"), str(tmp_path / "nope"), env=installed.env())
    assert r.returncode == 1
    assert "workspace folder does not exist" in r.stderr


@pytest.mark.parametrize("name", SCRIPTS)
def test_every_script_has_help_and_rejects_unknown_options(name: str, tmp_path: Path):
    script = REPO / "deploy" / name
    assert os.access(script, os.X_OK), f"{name} is not executable"
    env = script_env(tmp_path / "home")
    r = run(script, "--help", env=env)
    assert r.returncode == 0 and r.stdout.startswith("Usage:"), r.stderr
    r = run(script, "--no-such-option", env=env)
    assert r.returncode == 2 and "unknown option" in r.stderr
    text = script.read_text()
    assert text.startswith("#!/usr/bin/env bash\n") and "set -euo pipefail" in text


# -- the first hour: what install and remove say and do ---------------------------------------------------


def test_install_says_how_long_and_prints_the_path_line_to_paste(installed: Installed, tmp_path: Path):
    out = str(installed.first["out"])
    assert "(usually 3-10 s)" in out and "venv created in " in out
    assert "(usually 15-60 s" in out and "pip-installed in " in out
    bin_dir = installed.ws / ".mam" / "bin"
    line = next(x for x in out.splitlines() if x.strip().startswith("export PATH="))
    assert line == f'    export PATH={bin_dir}:"$PATH"'
    assert sorted(p.name for p in bin_dir.iterdir()) == ["mam"]  # only mam: no python3, no pip
    # Pasted into a shell, `mam` is the workspace's (the script changed no file of the user's), and
    # python3 and pip are still the system's.
    r = subprocess.run(
        ["bash", "--norc", "--noprofile", "-c", f"{line}; command -v mam; mam --version; command -v python3 pip"],
        env=installed.env(PATH="/usr/bin:/bin"),
        cwd=installed.ws,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    found = r.stdout.splitlines()
    assert found[:2] == [str(bin_dir / "mam"), f"mam, version {mam.__version__}"], r.stderr
    assert not any(str(installed.ws) in x for x in found[2:]), found
    assert not (installed.home / ".bashrc").exists() and not (installed.home / ".profile").exists()


def test_the_path_line_runs_the_mam_of_the_workspace_it_is_used_in(installed: Installed, tmp_path: Path):
    """Workspace A's PATH line, used in workspace B (or below it, or with MAM_WORKSPACE=B), runs B's mam;
    outside every workspace, A's."""
    ws_b = copy_workspace(installed.ws, tmp_path / "ws-b")
    (ws_b / "sub" / "deeper").mkdir(parents=True)
    (ws_b / ".venv/bin/mam").unlink()  # a hard link to A's: replaced, never written through
    (ws_b / ".venv/bin/mam").write_text('#!/bin/sh\necho "mam of B: $*"\n')
    (ws_b / ".venv/bin/mam").chmod(0o755)
    line = f'export PATH={installed.ws / ".mam" / "bin"}:"$PATH"'
    outside = tmp_path / "elsewhere"
    outside.mkdir()

    def ran(cwd: Path, **extra: str) -> str:
        r = subprocess.run(
            ["bash", "--norc", "--noprofile", "-c", f"{line}; mam --version"],
            env=installed.env(PATH="/usr/bin:/bin", **extra),
            cwd=cwd,
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
        assert r.returncode == 0, r.stderr
        return r.stdout.strip()

    assert ran(ws_b) == ran(ws_b / "sub" / "deeper") == "mam of B: --version"
    assert ran(outside, MAM_WORKSPACE=str(ws_b)) == "mam of B: --version"
    assert ran(outside) == ran(installed.ws) == f"mam, version {mam.__version__}"


def test_herdr_not_found_is_said_once_even_for_a_new_folder(installed: Installed, tmp_path: Path):
    if shutil.which("herdr") is not None:
        pytest.skip("herdr is installed here")
    # A Python whose venv step fails: the run stops right after the second look at the prerequisites.
    fake = tmp_path / "python3"
    fake.write_text(f'#!/bin/sh\n[ "$1" = -m ] && [ "$2" = venv ] && exit 1\nexec {BASE_PYTHON} "$@"\n')
    fake.chmod(0o755)
    r = run(installed.script("install.sh"), str(tmp_path / "new-ws"), env=installed.env(PYTHON=str(fake)))
    assert r.returncode == 1 and "could not create the venv" in r.stderr
    assert "created the workspace folder" in r.stdout
    assert r.stdout.count("herdr not found") == 1, r.stdout


def test_remove_refuses_while_sessions_run_stops_them_with_force_and_purges_after(
    installed: Installed, ws_copy: Path, tmux_server
):
    env = installed.env(MAM_TMUX_SERVER=tmux_server.name)
    mam_bin = str(ws_copy / ".venv" / "bin" / "mam")
    made = subprocess.run(
        [mam_bin, "--workspace", str(ws_copy), "session", "create", "--agent", "demo", "--role", "dev",
         "--session", "dev-1", "--json"],
        env=env, capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    assert made.returncode == 0, made.stderr
    pane = json.loads(made.stdout)["pane_id"]

    refused = run(installed.script("remove.sh"), str(ws_copy), env=env)
    assert refused.returncode == 1
    assert "sessions still running" in refused.stderr and "  dev-1 (demo)" in refused.stderr
    assert "--force" in refused.stderr
    assert (ws_copy / ".venv" / "bin" / "mam").exists() and (ws_copy / ".mam/install-manifest.json").exists()

    forced = run(installed.script("remove.sh"), "--force", str(ws_copy), env=env)
    assert forced.returncode == 0, forced.stderr
    assert "stopped session dev-1 (demo)" in forced.stdout
    assert not (ws_copy / ".venv").exists()
    alive = subprocess.run(
        ["tmux", "-L", tmux_server.name, "display-message", "-p", "-t", pane, "#{pane_dead}"],
        capture_output=True, text=True, check=False,
    )  # fmt: skip
    assert alive.returncode != 0 or alive.stdout.strip() == "1"  # the agent exited (pane gone or dead)

    purged = run(installed.script("remove.sh"), "--purge", str(ws_copy), env=env)
    assert purged.returncode == 0, purged.stderr
    assert not (ws_copy / ".mam").exists()
    again = run(installed.script("remove.sh"), "--purge", str(ws_copy), env=env)
    assert again.returncode == 1 and "nothing to remove" in again.stderr


FAKE_VENV_PYTHON = """#!/bin/sh
# A venv-making Python whose venv's python only records how pip was called.
if [ "$1" = -m ] && [ "$2" = venv ]; then
    mkdir -p "$4/bin"
    printf '#!/bin/sh\\necho "$*" >> %s\\n' "{log}" > "$4/bin/python"
    chmod +x "$4/bin/python"
    exit 0
fi
exec {python} "$@"
"""


def _pip_args(installed: Installed, tmp_path: Path, *, terminal: bool) -> tuple[str, str]:
    """How install.sh called pip (with a fake venv whose python only records it), and what it printed."""
    import pty

    log = tmp_path / f"pip-{terminal}.log"
    fake = tmp_path / f"python3-{terminal}"
    fake.write_text(FAKE_VENV_PYTHON.format(log=log, python=BASE_PYTHON))
    fake.chmod(0o755)
    argv = ["bash", str(installed.script("install.sh")), str(tmp_path / f"ws-{terminal}")]
    env = installed.env(PYTHON=str(fake))
    shown = b""
    if terminal:
        master, slave = pty.openpty()
        try:
            proc = subprocess.Popen(argv, env=env, stdin=subprocess.DEVNULL, stdout=slave, stderr=slave)
            os.close(slave)
            while True:  # drain the terminal until every writer closed it
                try:
                    chunk = os.read(master, 4096)
                except OSError:
                    break
                if not chunk:
                    break
                shown += chunk
            proc.wait(timeout=120)
        finally:
            os.close(master)
    else:
        r = run(installed.script("install.sh"), argv[2], env=env)
        shown = (r.stdout + r.stderr).encode()
    args = next(line for line in log.read_text().splitlines() if " -m pip install " in f" {line} ")
    return args, shown.decode("utf-8", "replace")


def test_pip_is_quiet_on_a_terminal_too(installed: Installed, tmp_path: Path):
    (on_terminal, shown), (piped, _) = (
        _pip_args(installed, tmp_path, terminal=True),
        _pip_args(installed, tmp_path, terminal=False),
    )
    for args in (on_terminal, piped):
        assert "--quiet" in args and "--progress-bar" not in args, args
    assert "pip-installing" in shown and "pip-installed in " in shown, shown
    # The terminal's one counting line is cleared once pip is done: nothing of it is left on screen.
    assert "\r\x1b[K" in shown or "pip is working" not in shown, shown


def test_install_output_is_short_and_ends_with_the_readmes_next_step(installed: Installed):
    out = str(installed.first["out"]).splitlines()
    assert len(out) <= 20, "\n".join(out)
    assert out[-1].endswith(
        f'next, as the README\'s "Your first hour with a real agent" goes: cd {installed.ws} && mam doctor'
    )
    assert "### Your first hour with a real agent" in (REPO / "README.md").read_text()
    assert "mam demo" in out[-2]


def test_the_installed_mam_env_sets_nothing_so_config_shows_what_the_user_changes(installed: Installed, ws_copy: Path):
    def sources() -> dict[str, str]:
        r = subprocess.run(
            [str(ws_copy / ".venv/bin/mam"), "--workspace", str(ws_copy), "config", "--json"],
            env=installed.env(),
            capture_output=True,
            text=True,
            timeout=60,
            check=True,
        )
        return {row["key"]: row["source"] for row in json.loads(r.stdout)["settings"]}

    assert set(sources().values()) == {"default"}
    env_file = ws_copy / ".mam.env"
    env_file.write_text(env_file.read_text().replace("# MAM_HEARTBEAT_S=30", "MAM_HEARTBEAT_S=12"))
    changed = {k: v for k, v in sources().items() if v != "default"}
    assert list(changed) == ["MAM_HEARTBEAT_S"] and changed["MAM_HEARTBEAT_S"].startswith(str(env_file))
