"""The package layout the code relies on: the adapter table and the demo agent's command line."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

from mam.agents import ADAPTERS, get_adapter, known_agents
from mam.util.proc import RUN_MODULE

ROOT = Path(__file__).resolve().parents[2]


def test_the_adapter_table_lists_every_adapter_module_and_only_those() -> None:
    defining = set()
    for path in sorted((ROOT / "mam").rglob("*.py")):
        tree = ast.parse(path.read_text())
        if any(
            isinstance(n, ast.Assign) and any(getattr(t, "id", "") == "ADAPTER" for t in n.targets) for n in tree.body
        ):
            defining.add(".".join(path.relative_to(ROOT).with_suffix("").parts))
    assert defining == set(ADAPTERS.values())
    assert known_agents() == sorted(ADAPTERS)
    for name in ADAPTERS:
        assert get_adapter(name).name == name


def test_the_demo_agent_starts_from_the_command_line_panes_run() -> None:
    argv = get_adapter("demo").launch_argv("some-id")
    assert argv[1:4] == ["-c", RUN_MODULE, "mam.agents.demo_agent"]
    r = subprocess.run(
        [sys.executable, "-m", "mam.agents.demo_agent", "--help"], capture_output=True, text=True, timeout=60
    )
    assert r.returncode == 0, r.stderr
    assert "--session-id" in r.stdout and "--resume" in r.stdout
