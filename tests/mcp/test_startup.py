"""The SDK is imported by `mam mcp` alone, Textual by `mam top` alone: other commands start as fast as before."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

SDK = {"mcp", "pydantic", "starlette", "uvicorn", "anyio", "httpx2", "textual", "rich"}


@pytest.mark.parametrize(
    "args", [["mcp", "--help"], ["top", "--help"], ["job", "list", "--json"], ["session", "status", "--json"]]
)
def test_commands_other_than_the_server_never_import_the_sdk(tmp_path: Path, args: list[str]):
    r = subprocess.run(
        [sys.executable, "-X", "importtime", "-m", "mam", "--workspace", str(tmp_path), *args],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert r.returncode == 0, r.stderr
    imported = {
        m.group(1).split(".")[0] for m in re.finditer(r"^import time:\s+\d+ \|\s+\d+ \|\s*([\w.]+)", r.stderr, re.M)
    }
    assert "click" in imported
    assert imported.isdisjoint(SDK), f"`mam {' '.join(args)}` imported {sorted(imported & SDK)}"


def test_the_server_does_import_it(tmp_path: Path):
    """The check above can fail: the same measure sees the SDK where it is used."""
    r = subprocess.run(
        [sys.executable, "-X", "importtime", "-c", "import mam.mcp.server"],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert r.returncode == 0, r.stderr
    assert re.search(r"\|\s*mcp\.server\.mcpserver$", r.stderr, re.M)
