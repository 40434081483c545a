"""One declaration per option: `mam session create`'s (mam/sessions/options.py `CREATE`), `mam loop`'s
(mam/loop/options.py `LOOP`) and `mam routine add`'s (mam/protocol.py `ROUTINE_ADD`) options make the click
command's options and the MCP tool's parameters; the README lists the MCP server's tools from its table
(mam/mcp/server.py `TOOLS`); `mam loop` takes the checkout to review as `--worktree-dir` and refuses the old
`--worktree` (which took a folder and swallowed a following `--approve`). The delegate request's own
declaration is tests/unit/test_request_options.py's."""

from __future__ import annotations

import asyncio
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import click
import pytest

from mam.cli.loop import loop
from mam.cli.routine import add
from mam.cli.session import create
from mam.loop.options import LOOP
from mam.mcp.server import TOOLS, build
from mam.protocol import ROUTINE_ADD, Field
from mam.sessions.options import CREATE

README = (Path(__file__).resolve().parents[2] / "README.md").read_text(encoding="utf-8")

# (the click command, the MCP tool, the declaration, what the command adds of its own, the fields it takes
# otherwise than as an option)
CASES: list[tuple[click.Command, str, tuple[Field, ...], set[str], set[str]]] = [
    (create, "session_create", CREATE, {"workspace", "as_json"}, set()),
    (loop, "loop_start", LOOP, {"workspace", "as_json", "quiet", "task_file", "old_worktree"}, set()),
    (add, "routine_add", ROUTINE_ADD, {"workspace", "as_json", "brief_file"}, {"name"}),
]


def tool_parameters() -> dict[str, set[str]]:
    tools = asyncio.run(build(None, poll_s=1).list_tools())  # type: ignore[arg-type]
    return {t.name: set(t.input_schema["properties"]) for t in tools}


@pytest.mark.parametrize("command, _tool, fields, own, positional", CASES, ids=lambda c: getattr(c, "name", None))
def test_the_cli_options_are_the_declared_ones(
    command: click.Command, _tool: str, fields: tuple[Field, ...], own: set[str], positional: set[str]
) -> None:
    options = {p.name for p in command.params if isinstance(p, click.Option)}
    assert options - own == {f.name for f in fields if f.flag}
    flags = {f.flag for f in fields if f.flag}
    said = {s for p in command.params if isinstance(p, click.Option) and p.name not in own for s in p.opts}
    assert said == flags
    assert {p.name for p in command.params if isinstance(p, click.Argument)} == positional


@pytest.mark.parametrize(
    "_command, tool, fields, _own, _positional", CASES, ids=lambda c: c if isinstance(c, str) else None
)
def test_the_mcp_parameters_are_the_declared_ones(
    _command: Any, tool: str, fields: tuple[Field, ...], _own: Any, _positional: Any
) -> None:
    assert tool_parameters()[tool] == {f.name for f in fields if f.mcp}


def test_the_declaration_check_can_fail() -> None:
    """A field added to a declaration but not to a front end is seen: here, one the tool never offers."""
    extra = Field("colour", str, "A colour", flag="--colour")
    assert tool_parameters()["session_create"] != {f.name for f in (*CREATE, extra) if f.mcp}


def test_the_readme_lists_every_mcp_tool_in_the_servers_order() -> None:
    listed = README.split("\nTools: ", 1)[1].split("(the table is in", 1)[0]
    assert re.findall(r"`(\w+)`", listed) == [t.name for t in TOOLS]
    assert sorted(tool_parameters()) == sorted(t.name for t in TOOLS)  # the table is what the server serves


@pytest.mark.parametrize("argv", [["--worktree", "--approve"], ["--worktree", "/tmp"]])
def test_loop_refuses_the_old_worktree_spelling(argv: list[str], tmp_path: Path) -> None:
    run = subprocess.run(
        [sys.executable, "-m", "mam", "--workspace", str(tmp_path), "loop", "--creator", "c", "--task", "t", *argv],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert run.returncode == 2
    assert run.stderr.strip().splitlines()[-1].endswith("as --worktree-dir DIR (--worktree is not an option)")


def test_loop_takes_worktree_dir_with_approve_after_it() -> None:
    ctx = loop.make_context("loop", ["--creator", "c", "--task", "t", "--worktree-dir", "wt", "--approve"])
    assert ctx.params["worktree_dir"] == "wt" and ctx.params["approve"] is True
