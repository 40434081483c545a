"""The skills: what an orchestrating agent reads (SKILL.md) and runs (scripts/*.sh).

- every contract skill that exists is complete: front matter, an executable thin script;
- each SKILL.md documents exactly the options of its CLI's --help, and every exit code of the
  contract table and of the CLI's --help;
- skills/lib/mam-exec.sh finds mam in the documented order and passes arguments unchanged;
- the scripts really drive mam: create, status, delegate, stop, resume, orc-onboard against a
  private tmux server, the demo agent and real brokers.
"""

from __future__ import annotations

import functools
import json
import os
import re
import shutil
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from mam.store.registry import Registry
from mam.workspace import Workspace
from tests.helpers.jobs import FAST
from tests.helpers.mamcli import mam

REPO = Path(__file__).resolve().parents[2]
SKILLS = REPO / "skills"
LIB = SKILLS / "lib" / "mam-exec.sh"
MAM = str(Path(sys.executable).parent / "mam")
SOURCE_LINE = 'source "$(dirname "${BASH_SOURCE[0]}")/../../lib/mam-exec.sh"'

# The skill contract (docs/architecture.md, "Contracts"): folder -> (script, mam command, its options, exit codes).
CONTRACT: dict[str, tuple[str, tuple[str, ...], set[str], set[int]]] = {
    "multi-agent-mux-create": (
        "create_session.sh",
        ("session", "create"),
        {"--workspace", "--agent", "--role", "--session", "--backend", "--herdr-session", "--onboard"},
        {0, 44, 45},
    ),
    "multi-agent-mux-stop": (
        "stop_session.sh",
        ("session", "stop"),
        {"--session", "--purge-conversation", "--yes"},
        {0},
    ),
    "multi-agent-mux-resume": ("resume_session.sh", ("session", "resume"), {"--session"}, {0}),
    "multi-agent-mux-status": ("status.sh", ("session", "status"), {"--json"}, {0}),
    "multi-agent-mux-monitor": ("reconcile.sh", ("monitor",), {"--subscribe", "--once"}, {0}),
    "multi-agent-mux-delegate-job": (
        "delegate_job.sh",
        ("job", "delegate"),
        {"--target", "--brief", "--brief-file", "--timeout", "--start-deadline", "--heartbeat", "--parent-job"},
        {0, 1, 2, 3, 5, 6},
    ),
    "multi-agent-mux-loop": (
        "run_loop.sh",
        ("loop",),
        {
            "--creator",
            "--reviewer",
            "--all-reviewer",
            "--task",
            "--planner",
            "--plan-talk",
            "--max-loop",
            "--max-rebut",
            "--review-only",
            "--worktree-dir",
            "--base",
        },
        {0, 1},
    ),
    "multi-agent-mux-orc-onboard": ("orc_onboard.sh", ("session", "onboard-orchestrator"), set(), {0}),
    # Not in the contract table: the runner's skill, asked for by the Monitor/remote issue.
    "multi-agent-mux-runner": ("runner.sh", ("runner",), {"--name"}, {0}),
    # The MCP server (issue 15).
    "multi-agent-mux-mcp": ("serve_mcp.sh", ("mcp",), {"--workspace", "--http", "--host", "--port"}, {0}),
    # Routines (issue 29): a script per verb; the others are in ROUTINE_SCRIPTS.
    "multi-agent-mux-routine": (
        "add_routine.sh",
        ("routine", "add"),
        {"--target", "--brief", "--brief-file", "--every", "--cron", "--tz", "--concurrency", "--catch-up"},
        {0, 1, 2, 5},
    ),
}
# Delivered now; the monitor and loop skills come with their CLIs.
REQUIRED = (
    "multi-agent-mux-create",
    "multi-agent-mux-stop",
    "multi-agent-mux-resume",
    "multi-agent-mux-status",
    "multi-agent-mux-delegate-job",
    "multi-agent-mux-orc-onboard",
    "multi-agent-mux-monitor",
    "multi-agent-mux-runner",
    "multi-agent-mux-loop",
    "multi-agent-mux-mcp",
    "multi-agent-mux-routine",
)
# Other CLIs a SKILL.md may quote outside its Options section (the agent side, job inspection).
RELATED: dict[str, tuple[tuple[str, ...], ...]] = {
    "multi-agent-mux-stop": (("session", "remove"), ("session", "create")),  # remove_session.sh; --worktree
    "multi-agent-mux-create": (("session", "fork"),),
    "multi-agent-mux-mcp": (("job", "delegate"), ("pause",), ("resume",)),
    "multi-agent-mux-loop": (("loop", "approve"), ("loop", "reject"), ("loop", "status"), ("session", "create")),
    "multi-agent-mux-status": (("job", "list"), ("job", "status"), ("session", "create"), ("web",)),  # mam web --stop
    "multi-agent-mux-runner": (("job", "delegate"), ("session", "status")),  # status.sh --fleet
    "multi-agent-mux-routine": (
        ("routine", "list"),
        ("routine", "log"),
        ("routine", "run"),
        ("job", "wait"),
    ),
    "multi-agent-mux-delegate-job": (
        ("event", "started"),
        ("event", "progress"),
        ("event", "heartbeat"),
        ("event", "completed"),
        ("event", "error"),
        ("job", "status"),
        ("job", "list"),
        ("job", "log"),
        ("job", "cancel"),
        ("job", "send"),
        ("job", "wait"),  # scripts/wait_job.sh
        ("session", "create"),  # --token-budget, named where exit 6 is explained
        ("job", "fanout"),  # fanout_job.sh
        ("job", "replay"),
        ("job", "pause"),  # pause_job.sh
        ("job", "resume"),  # resume_job.sh
        ("pause",),  # pause_job.sh --all
        ("resume",),
    ),
}
# Documented by every skill: the script's own "mam not found".
SCRIPT_EXIT_CODES = {127}
CONTRACT_STATUS_KEYS = {
    "name",
    "agent",
    "role",
    "status",
    "backend",
    "server",
    "pane_id",
    "cwd",
    "conversation_id",
    "drift",
}
CONTRACT_JOB_KEYS = {"id", "session", "state", "exit_code", "reason"}

LONG_OPTION = re.compile(r"(?<![\w-])--[a-z][a-z0-9-]*")

existing = [name for name in CONTRACT if (SKILLS / name).is_dir()]


def script_of(skill: str) -> Path:
    return SKILLS / skill / "scripts" / CONTRACT[skill][0]


# -- parsing ------------------------------------------------------------------------------------
@functools.cache
def cli_help(words: tuple[str, ...]) -> str:
    proc = subprocess.run([MAM, *words, "--help"], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    return proc.stdout


def help_options(words: tuple[str, ...]) -> set[str]:
    """The long options listed in the Options section of `mam WORDS --help` (name column only)."""
    text = cli_help(words)
    section = text.split("\nOptions:\n", 1)[1]
    found: set[str] = set()
    for line in section.splitlines():
        if line.strip() and not line.startswith(" "):
            break  # the next section
        if not line.strip():
            continue
        indent = len(line) - len(line.lstrip())
        if indent > 4 or not line.lstrip().startswith("-"):
            continue  # a wrapped description line
        names = re.split(r"\s{2,}", line.strip(), maxsplit=1)[0]
        found |= set(LONG_OPTION.findall(names))
    return found


def help_exit_codes(words: tuple[str, ...]) -> set[int]:
    """The exit codes named in the help text: numbers that start an item after the word `Exit`."""
    text = cli_help(words).split("\nOptions:\n", 1)[0]
    start = text.find("Exit")
    if start < 0:
        return set()
    return {int(n) for n in re.findall(r"(?:^|[\s;:])(\d{1,3})(?=\s+[a-z(`-]|\.|\s*$)", text[start:], flags=re.M)}


def skill_doc(skill: str) -> str:
    return (SKILLS / skill / "SKILL.md").read_text(encoding="utf-8")


def front_matter(text: str) -> dict[str, str]:
    assert text.startswith("---\n"), "SKILL.md must start with YAML front matter"
    block = text[4:].split("\n---\n", 1)[0]
    out = {}
    for line in block.splitlines():
        key, sep, value = line.partition(":")
        assert sep and not key.startswith(" "), f"front matter holds one `key: value` per line, got {line!r}"
        out[key.strip()] = value.strip()
    return out


def section(text: str, title: str) -> str:
    match = re.search(rf"^## {re.escape(title)}\n(.*?)(?=^## |\Z)", text, flags=re.M | re.S)
    assert match, f"SKILL.md has no `## {title}` section"
    return match.group(1)


def doc_exit_codes(text: str) -> set[int]:
    return {int(n) for n in re.findall(r"^\|\s*(\d{1,3})\s*\|", section(text, "Exit codes"), flags=re.M)}


# -- structure --------------------------------------------------------------------------------------
def test_the_delivered_skills_exist_and_nothing_else():
    folders = {p.name for p in SKILLS.iterdir() if p.is_dir()}
    assert set(REQUIRED) <= folders
    assert folders - {"lib"} <= set(CONTRACT), (
        f"skill folders outside the contract: {folders - {'lib'} - set(CONTRACT)}"
    )


@pytest.mark.parametrize("skill", existing)
def test_skill_md_front_matter(skill: str):
    meta = front_matter(skill_doc(skill))
    assert meta.get("name") == skill
    description = meta.get("description", "")
    assert len(description) > 30 and description.startswith("Use when"), description
    assert description.endswith(".") and ". " not in description, "one sentence"


@pytest.mark.parametrize("skill", existing)
def test_skill_md_has_the_sections_an_agent_needs(skill: str):
    text = skill_doc(skill)
    for title in ("When to use it", "Options", "Exit codes", "Examples", "What it never does"):
        section(text, title)
    example = f".agents/skills/{skill}/scripts/{CONTRACT[skill][0]}"
    assert example in section(text, "Examples")
    assert 40 <= len(text.splitlines()) <= 130


@pytest.mark.parametrize("skill", existing)
def test_script_is_a_thin_executable_wrapper(skill: str):
    script = script_of(skill)
    assert script.is_file(), script
    assert script.stat().st_mode & stat.S_IXUSR and os.access(script, os.X_OK)
    text = script.read_text()
    lines = [line for line in text.splitlines() if line.strip() and not line.lstrip().startswith("#")]
    assert text.startswith("#!/usr/bin/env bash\n")
    assert lines[0] == "set -euo pipefail"
    assert lines[1] == SOURCE_LINE
    assert lines[-1] == f'exec "$MAM" {" ".join(CONTRACT[skill][1])} "$@"'
    assert len(lines) == 3, "the script only sources the lib and execs mam"
    assert "eval" not in text
    assert subprocess.run(["bash", "-n", str(script)], capture_output=True).returncode == 0


def test_fork_session_is_a_thin_wrapper_documented_like_the_cli():
    script = SKILLS / "multi-agent-mux-create" / "scripts" / "fork_session.sh"
    assert os.access(script, os.X_OK)
    lines = [line for line in script.read_text().splitlines() if line.strip() and not line.lstrip().startswith("#")]
    assert lines == ["set -euo pipefail", SOURCE_LINE, 'exec "$MAM" session fork "$@"']
    part = section(skill_doc("multi-agent-mux-create"), "Forking a session: fork_session.sh")
    table = part.split("| option |", 1)[1].split("\n\n", 1)[0]
    assert set(LONG_OPTION.findall(table)) == help_options(("session", "fork"))
    said = part.split("Exit codes:", 1)[1]
    codes = {int(n) for n in re.findall(r"(?:^|[\s;:])(\d{1,3})(?=\s+[a-z(`-]|\.|\s*$)", said, flags=re.M)}
    assert codes == help_exit_codes(("session", "fork")) == {0, 1, 2, 5}, codes


ROUTINE_SCRIPTS = {
    "list_routines.sh": "list",
    "routine_log.sh": "log",
    "pause_routine.sh": "pause",
    "resume_routine.sh": "resume",
    "remove_routine.sh": "remove",
    "run_routine.sh": "run",
}


@pytest.mark.parametrize(("script", "verb"), sorted(ROUTINE_SCRIPTS.items()))
def test_each_routine_verb_has_a_thin_script_named_in_the_skill(script: str, verb: str):
    path = SKILLS / "multi-agent-mux-routine" / "scripts" / script
    assert os.access(path, os.X_OK)
    lines = [line for line in path.read_text().splitlines() if line.strip() and not line.lstrip().startswith("#")]
    assert lines == ["set -euo pipefail", SOURCE_LINE, f'exec "$MAM" routine {verb} "$@"']
    assert f"`{script}" in section(skill_doc("multi-agent-mux-routine"), "Scripts")
    assert help_exit_codes(("routine", verb)) <= doc_exit_codes(skill_doc("multi-agent-mux-routine"))


def test_lib_has_no_eval_and_parses():
    text = LIB.read_text()
    assert not re.search(r"\beval\b", text)
    assert subprocess.run(["bash", "-n", str(LIB)], capture_output=True).returncode == 0


# -- options and exit codes: SKILL.md against the CLI and the contract ----------------------------
@pytest.mark.parametrize("skill", existing)
def test_options_section_matches_the_cli_help_exactly(skill: str):
    documented = set(LONG_OPTION.findall(section(skill_doc(skill), "Options")))
    listed = help_options(CONTRACT[skill][1])
    assert listed, "parsed no options from --help"
    assert listed - documented == set(), f"options of --help missing from SKILL.md: {sorted(listed - documented)}"
    assert documented - listed == set(), (
        f"options in SKILL.md's Options that --help lacks: {sorted(documented - listed)}"
    )


@pytest.mark.parametrize("skill", existing)
def test_every_option_mentioned_anywhere_exists(skill: str):
    allowed = help_options(CONTRACT[skill][1]).union(*(help_options(w) for w in RELATED.get(skill, ())))
    unknown = set(LONG_OPTION.findall(skill_doc(skill))) - allowed
    assert unknown == set(), f"SKILL.md mentions options no CLI it uses has: {sorted(unknown)}"


@pytest.mark.parametrize("skill", existing)
def test_contract_options_exist_in_the_cli(skill: str):
    missing = CONTRACT[skill][2] - help_options(CONTRACT[skill][1])
    assert missing == set(), f"the contract table names options the CLI lacks: {sorted(missing)}"


@pytest.mark.parametrize("skill", existing)
def test_every_exit_code_is_documented(skill: str):
    _, words, _, contract_codes = CONTRACT[skill]
    from_help = help_exit_codes(words)
    assert 0 in from_help, f"no exit codes parsed from `mam {' '.join(words)} --help`"
    missing = (contract_codes | from_help | SCRIPT_EXIT_CODES) - doc_exit_codes(skill_doc(skill))
    assert missing == set(), f"exit codes not in SKILL.md's table: {sorted(missing)}"


def test_help_parsers_see_what_the_help_says():
    assert help_options(("job", "delegate")) >= {
        "--follow",
        "--quiet",
        "--brief-file",
        "--allow-insecure-broker",
        "--help",
        "--workspace",
    }
    assert help_exit_codes(("session", "create")) == {0, 1, 2, 5, 44, 45}
    assert help_exit_codes(("job", "delegate")) == {0, 1, 2, 3, 5, 6, 129, 130, 143}
    assert help_exit_codes(("session", "onboard-orchestrator")) == {0}


# -- the lib: which mam, and arguments unchanged ------------------------------------------------
NASTY_ARGS = [
    "a b",
    "it's",
    'say "hi"',
    "$(touch pwned-subst)",
    "x; touch pwned-semi",
    "`touch pwned-tick`",
    "*",
    "",
    "  lead",
    "new\nline",
    "$HOME",
    "--flag=$(id)",
    "\\back\\slash",
    "-",
    "--",
]


def fake_mam(path: Path, label: str) -> Path:
    """An executable that prints which fake it is and the argv it got, as JSON."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(
        f"#!{sys.executable}\nimport json, sys\nprint(json.dumps({{'who': {label!r}, 'argv': sys.argv[1:]}}))\n"
    )
    path.chmod(0o755)
    return path


def bare_path(_tmp: Path) -> str:
    """A PATH with bash and coreutils but no mam (the dev venv's bin is left out)."""
    dirs = [d for d in ("/usr/local/bin", "/usr/bin", "/bin") if Path(d).is_dir() and not (Path(d) / "mam").exists()]
    return os.pathsep.join(dirs)


def run_script(
    script: Path, args: list[str], env: dict[str, str], cwd: Path, via_bash: bool = False
) -> subprocess.CompletedProcess[str]:
    argv = ["bash", os.path.relpath(script, cwd)] if via_bash else [str(script)]
    return subprocess.run([*argv, *args], env=env, cwd=cwd, capture_output=True, text=True, timeout=30)


@pytest.fixture
def installed_copy(tmp_path: Path) -> Path:
    """A workspace with a copy of the skills at .agents/skills (as install.sh lays them out), no venv yet."""
    ws = tmp_path / "outer" / "ws"
    shutil.copytree(SKILLS, ws / ".agents" / "skills", ignore=shutil.ignore_patterns("__pycache__"))
    for parent in ws.parents:
        assert not (parent / ".venv" / "bin" / "mam").exists(), (
            f"a mam venv above the temp dir ({parent}) spoils this test"
        )
    return ws


@pytest.mark.parametrize("skill", existing)
def test_mam_bin_wins_and_arguments_pass_unchanged(skill: str, tmp_path: Path):
    fake = fake_mam(tmp_path / "bin dir" / "fake mam", "MAM_BIN")
    env = {**os.environ, "MAM_BIN": str(fake), "PATH": bare_path(tmp_path)}
    proc = run_script(script_of(skill), NASTY_ARGS, env, tmp_path)
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout)
    assert out == {"who": "MAM_BIN", "argv": [*CONTRACT[skill][1], *NASTY_ARGS]}
    assert not list(tmp_path.glob("pwned*"))


def test_delegate_job_passes_every_contract_exit_code_through(tmp_path: Path):
    fake = tmp_path / "fake-mam"
    fake.write_text('#!/bin/sh\nexit "$FAKE_EXIT"\n')
    fake.chmod(0o755)
    for code in sorted(CONTRACT["multi-agent-mux-delegate-job"][3]):  # 6 too: refused or stopped by a budget
        env = {**os.environ, "MAM_BIN": str(fake), "PATH": bare_path(tmp_path), "FAKE_EXIT": str(code)}
        assert run_script(script_of("multi-agent-mux-delegate-job"), [], env, tmp_path).returncode == code


def test_lookup_order_in_an_installed_workspace(installed_copy: Path, tmp_path: Path):
    ws = installed_copy
    script = ws / ".agents/skills/multi-agent-mux-delegate-job/scripts/delegate_job.sh"
    path_dir = tmp_path / "on-path"
    fake_mam(path_dir / "mam", "PATH")
    env = {**os.environ, "PATH": f"{path_dir}{os.pathsep}{bare_path(tmp_path)}"}
    env.pop("MAM_BIN", None)

    def who(extra: dict[str, str] | None = None, via_bash: bool = False, cwd: Path = ws) -> dict:
        proc = run_script(script, NASTY_ARGS, {**env, **(extra or {})}, cwd, via_bash=via_bash)
        assert proc.returncode == 0, proc.stderr
        out = json.loads(proc.stdout)
        assert out["argv"] == ["job", "delegate", *NASTY_ARGS]
        return out

    assert who()["who"] == "PATH"  # no MAM_BIN, no venv above the script
    fake_mam(tmp_path / "outer" / ".venv" / "bin" / "mam", "outer venv")
    assert who()["who"] == "outer venv"
    fake_mam(ws / ".venv" / "bin" / "mam", "workspace venv")
    assert who()["who"] == "workspace venv"  # the nearest one wins
    assert who(via_bash=True)["who"] == "workspace venv"  # `bash .agents/skills/...` from the workspace
    assert who(via_bash=True, cwd=tmp_path)["who"] == "workspace venv"  # ... and from elsewhere
    assert who({"MAM_BIN": str(fake_mam(tmp_path / "explicit" / "mam", "MAM_BIN"))})["who"] == "MAM_BIN"
    assert not list(ws.glob("pwned*")) and not list(tmp_path.glob("pwned*"))


def test_an_installed_skill_acts_on_its_own_workspace_from_anywhere(installed_copy: Path, tmp_path: Path):
    ws = installed_copy
    fake = ws / ".venv" / "bin" / "mam"
    fake.parent.mkdir(parents=True)
    fake.write_text(f"#!{sys.executable}\nimport os\nprint(os.environ.get('MAM_WORKSPACE', '<unset>'))\n")
    fake.chmod(0o755)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    env = {**os.environ, "PATH": bare_path(tmp_path)}
    env.pop("MAM_BIN", None)
    env.pop("MAM_WORKSPACE", None)
    script = ws / ".agents/skills/multi-agent-mux-status/scripts/status.sh"

    def workspace_seen(extra: dict[str, str], cwd: Path, via_bash: bool = False) -> str:
        proc = run_script(script, [], {**env, **extra}, cwd, via_bash=via_bash)
        assert proc.returncode == 0, proc.stderr
        return proc.stdout.strip()

    assert workspace_seen({}, elsewhere) == "<unset>"  # not a workspace (no .mam.env, no .mam/): e.g. ~/.agents/skills
    (ws / ".mam.env").write_text("")  # what install.sh writes
    assert workspace_seen({}, elsewhere) == str(ws.resolve())
    assert workspace_seen({}, elsewhere, via_bash=True) == str(ws.resolve())
    assert workspace_seen({"MAM_WORKSPACE": str(elsewhere)}, elsewhere) == str(elsewhere)  # an explicit choice stays
    # A skill outside any .agents/skills/ layout (the clone's own skills/) leaves the choice to mam.
    repo_env = {**env, "MAM_BIN": str(fake)}
    proc = run_script(script_of("multi-agent-mux-status"), [], repo_env, elsewhere)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "<unset>"


def test_a_non_executable_venv_mam_is_skipped(installed_copy: Path, tmp_path: Path):
    ws = installed_copy
    (ws / ".venv" / "bin").mkdir(parents=True)
    (ws / ".venv" / "bin" / "mam").write_text("not a program\n")  # not executable
    fake_mam(tmp_path / "outer" / ".venv" / "bin" / "mam", "outer venv")
    env = {**os.environ, "PATH": bare_path(tmp_path)}
    env.pop("MAM_BIN", None)
    proc = run_script(ws / ".agents/skills/multi-agent-mux-status/scripts/status.sh", ["--json"], env, ws)
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout) == {"who": "outer venv", "argv": ["session", "status", "--json"]}


def test_no_mam_anywhere_is_exit_127_with_install_advice(installed_copy: Path, tmp_path: Path):
    env = {**os.environ, "PATH": bare_path(tmp_path)}
    env.pop("MAM_BIN", None)
    proc = run_script(
        installed_copy / ".agents/skills/multi-agent-mux-create/scripts/create_session.sh",
        ["--agent", "demo"],
        env,
        installed_copy,
    )
    assert proc.returncode == 127
    assert proc.stdout == ""
    assert "bash deploy/install.sh" in proc.stderr and "MAM_BIN" in proc.stderr


def test_a_bad_mam_bin_is_exit_127_not_a_silent_fallback(installed_copy: Path, tmp_path: Path):
    fake_mam(installed_copy / ".venv" / "bin" / "mam", "workspace venv")
    env = {**os.environ, "MAM_BIN": str(tmp_path / "no-such-mam"), "PATH": bare_path(tmp_path)}
    proc = run_script(
        installed_copy / ".agents/skills/multi-agent-mux-stop/scripts/stop_session.sh",
        ["--session", "x"],
        env,
        installed_copy,
    )
    assert proc.returncode == 127
    assert "MAM_BIN" in proc.stderr and proc.stdout == ""


@pytest.mark.skipif(not (REPO / ".venv" / "bin" / "mam").exists(), reason="no dev venv at the repo root")
def test_in_the_repo_the_dev_venv_is_found(tmp_path: Path):
    env = {**os.environ, "PATH": bare_path(tmp_path)}
    env.pop("MAM_BIN", None)
    proc = run_script(script_of("multi-agent-mux-status"), ["--help"], env, tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert "Usage: mam session status" in proc.stdout


# -- the scripts against real mam ------------------------------------------------------------------
def skill(skill_name: str, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "MAM_BIN": MAM}
    return subprocess.run([str(script_of(skill_name)), *args], env=env, capture_output=True, text=True, timeout=90)


def status_rows() -> list[dict]:
    proc = skill("multi-agent-mux-status", "--json")
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)


def test_status_of_an_empty_workspace_starts_and_creates_nothing(workspace: Workspace, tmux_server):
    proc = skill("multi-agent-mux-status", "--json")
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout) == []
    assert skill("multi-agent-mux-status").stdout.strip() == "no sessions"
    assert not (workspace.root / ".mam").exists()
    assert not tmux_server.running()


def test_documented_failures_without_a_session(workspace: Workspace, amqtt_broker, monkeypatch):
    for key, value in {**amqtt_broker.env(), **FAST}.items():
        monkeypatch.setenv(key, value)
    assert skill("multi-agent-mux-stop", "--session", "nope").returncode == 5
    assert skill("multi-agent-mux-stop", "--session", "nope", "--purge-conversation").returncode == 2
    assert skill("multi-agent-mux-resume", "--session", "nope").returncode == 5
    assert skill("multi-agent-mux-orc-onboard").returncode == 2  # not in a pane (the test env has no TMUX_PANE)
    assert skill("multi-agent-mux-orc-onboard", "--pane", "%1").returncode == 2
    assert skill("multi-agent-mux-create", "--agent", "nosuch", "--role", "dev", "--session", "s").returncode == 2
    proc = skill("multi-agent-mux-delegate-job", "--target", "tmux:nope", "--brief", "x", "--json")
    assert proc.returncode == 5, proc.stderr
    assert proc.stdout == "" and "no session named 'nope' in this workspace" in proc.stderr  # and no job made
    assert skill("multi-agent-mux-delegate-job", "--target", "tmux:nope").returncode == 2  # no brief


def test_the_scripts_drive_a_demo_session_end_to_end(workspace: Workspace, tmux_server, broker, monkeypatch, poll):
    for key, value in {**broker.env(), **FAST}.items():
        monkeypatch.setenv(key, value)
    ws = workspace.root
    try:
        proc = skill(
            "multi-agent-mux-create", "--workspace", str(ws), "--agent", "demo", "--role", "dev", "--session", "s1"
        )
        assert proc.returncode == 0, proc.stderr

        rows = status_rows()
        assert len(rows) == 1
        row = rows[0]
        assert CONTRACT_STATUS_KEYS <= set(row)
        assert (row["name"], row["agent"], row["role"], row["status"], row["backend"]) == (
            "s1",
            "demo",
            "dev",
            "running",
            "tmux",
        )
        assert row["server"] == tmux_server.name and row["pane_id"] and row["cwd"] == str(ws) and row["drift"] == ""

        proc = skill(
            "multi-agent-mux-delegate-job",
            "--target",
            "tmux:s1",
            "--brief",
            "demo-write: f.txt :: x",
            "--start-deadline",
            "10",
            "--heartbeat",
            "1",
        )
        assert proc.returncode == 0, proc.stderr
        assert (ws / "f.txt").read_text() == "x\n"
        jobs = json.loads(mam("job", "list", "--json", check=True).stdout)
        assert len(jobs) == 1
        job = json.loads(mam("job", "status", jobs[0]["id"], "--json", check=True).stdout)
        assert CONTRACT_JOB_KEYS <= set(job)
        assert (job["session"], job["state"], job["exit_code"]) == ("s1", "completed", 0)
        assert stat.S_IMODE(workspace.job_record(job["id"]).stat().st_mode) == 0o600
        assert (ws / ".mam" / "delegate_job_logs" / job["id"] / "audit.jsonl").is_file()

        proc = skill("multi-agent-mux-stop", "--session", "s1")
        assert proc.returncode == 0, proc.stderr
        row = status_rows()[0]
        assert row["status"] == "stopped" and row["resumable"] is True and row["conversation_id"]
        conversation = row["conversation_id"]
        assert (
            skill("multi-agent-mux-create", "--agent", "demo", "--role", "dev", "--session", "s1").returncode == 5
        )  # name taken

        proc = skill("multi-agent-mux-resume", "--session", "s1")
        assert proc.returncode == 0, proc.stderr
        row = poll(
            lambda: next((r for r in status_rows() if r["pane_alive"]), None),
            timeout=20,
            message="resumed pane not alive",
        )
        assert row["status"] == "running" and row["conversation_id"] == conversation and row["drift"] == ""
        assert skill("multi-agent-mux-resume", "--session", "s1").returncode == 1  # already running

        proc = skill("multi-agent-mux-orc-onboard", "--backend", "tmux", "--server", "X", "--pane", "%99")
        assert proc.returncode == 0, proc.stderr
        registry = Registry(workspace)
        try:
            assert "tmux:X:%99" in {o.key for o in registry.orchestrators()}
        finally:
            registry.close()
        assert [r["name"] for r in status_rows()] == ["s1"]  # the orchestrator is not a session
    finally:
        skill("multi-agent-mux-stop", "--session", "s1")
        mam("broker", "stop")  # harmless: nothing here should have started the embedded broker


def test_wait_job_script_is_a_thin_wrapper_of_mam_job_wait(workspace: Workspace):
    script = SKILLS / "multi-agent-mux-delegate-job" / "scripts" / "wait_job.sh"
    assert script.stat().st_mode & stat.S_IXUSR
    text = script.read_text()
    lines = [line for line in text.splitlines() if line.strip() and not line.lstrip().startswith("#")]
    assert lines == ["set -euo pipefail", SOURCE_LINE, 'exec "$MAM" job wait "$@"']
    env = {**os.environ, "MAM_BIN": MAM}
    proc = subprocess.run([str(script), "job-0123456789abcdef"], env=env, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 2 and "no such job: job-0123456789abcdef" in proc.stderr
    assert not (workspace.root / ".mam").exists()  # nothing written
