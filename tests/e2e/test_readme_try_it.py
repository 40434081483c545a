"""The README's "Trying it without an agent CLI": every command of its code blocks runs as printed, in a
git workspace, against real demo sessions, and prints what its `# prints:` comment says; every directive of
the demo agent (mam/demo/agent.py) and `--agent demo` have an example there; `mam demo` ends by naming it."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest

from mam.demo import TRY_IT
from tests.helpers.jobs import FAST
from tests.helpers.mamcli import mam
from tests.loop.gitrepo import make_repo

README = Path(__file__).resolve().parents[2] / "README.md"
TITLE = "### Trying it without an agent CLI"


def section() -> str:
    text = README.read_text()
    assert f"\n{TITLE}\n" in text
    body = text.split(f"\n{TITLE}\n", 1)[1]
    return re.split(r"\n#{2,3} ", body, maxsplit=1)[0]


def examples() -> list[tuple[str, str]]:
    """(command line, what its stdout holds) of each line of the section's bash blocks."""
    out = []
    for block in re.findall(r"```bash\n(.*?)```", section(), re.S):
        for line in block.splitlines():
            command, _, prints = line.partition("  # prints: ")
            out.append((command.strip(), prints.strip()))
    return out


def test_every_directive_and_the_demo_agent_have_an_example():
    commands = "\n".join(c for c, _ in examples())
    assert "--agent demo" in commands
    source = Path(__file__).resolve().parents[2] / "mam" / "demo" / "agent.py"
    named = ("demo-sleep", "demo-write", "demo-append", "demo-commit", "demo-verdict", "demo-behaviour")
    assert all(f"{d}:" in source.read_text() for d in named)
    for name in (*(f"{d}:" for d in named), "MAM_DEMO_ANSWER=", "MAM_DEMO_BEHAVIOUR="):
        assert name in commands, f"no example of {name}"


@pytest.fixture
def git_ws(workspace, amqtt_broker, monkeypatch):
    for key, value in {**amqtt_broker.env(), **FAST}.items():
        monkeypatch.setenv(key, value)
    make_repo(workspace.root)
    return workspace


def test_the_examples_work_as_printed(git_ws):
    for command, prints in examples():
        proc = subprocess.run(
            ["bash", "-c", command], cwd=git_ws.root, capture_output=True, text=True, timeout=120, check=False
        )
        assert proc.returncode == 0, f"{command}\nexit {proc.returncode}\n{proc.stdout}\n{proc.stderr}"
        assert prints in proc.stdout, f"{command}\nprints {proc.stdout!r}, not {prints!r}\n{proc.stderr}"


def test_mam_demo_ends_by_naming_the_section(tmp_path):
    proc = mam("demo", "--no-loop", env={"TMPDIR": str(tmp_path)}, timeout=300)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert proc.stdout.rstrip("\n").splitlines()[-1] == f"next: {TRY_IT}"
    assert '"Trying it without an agent CLI"' in TRY_IT
