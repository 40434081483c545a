"""Ids are checked where they enter, before any file, row or folder exists (issue 12, item 1).

The attack: `mam job delegate --target x --brief hi --job-id ../../pwned` used to write
`pwned.json` (with the job's token) and `pwned/` next to the workspace before it said
"invalid job id". Every refusal here must exit 2 with a clear message and leave nothing.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from mam.errors import UsageError
from mam.ids import check_id, check_job_id, check_loop_id, check_name
from mam.workspace import Workspace
from tests.helpers.mamcli import mam

HOSTILE_IDS = [
    "../../pwned",
    "..",
    ".",
    "../x",
    "a/b",
    "/etc/passwd",
    "",
    ".hidden",
    "-rf",
    "a b",
    "a\nb",
    "x" * 129,
    "job#",
    "job+",
    "j\x00b",
]


def tree(root: Path) -> list[str]:
    return sorted(str(p.relative_to(root)) for p in root.rglob("*"))


@pytest.mark.parametrize("value", HOSTILE_IDS)
def test_the_validator_refuses_what_could_name_another_path(value: str) -> None:
    for check in (check_job_id, check_loop_id, check_name):
        with pytest.raises(UsageError, match="starting with a letter or digit"):
            check(value)


def test_the_validator_keeps_ordinary_ids() -> None:
    assert check_job_id("job-0123456789abcdef") == "job-0123456789abcdef"
    assert check_loop_id("loop-20261201-102233-a1b2c3") == "loop-20261201-102233-a1b2c3"
    assert check_name("dev-1.b_2") == "dev-1.b_2"
    assert check_job_id("j" * 128) and check_id("a..b") == "a..b"
    with pytest.raises(UsageError):
        check_name("n" * 65)
    with pytest.raises(UsageError):
        check_job_id(None)


def test_a_traversing_job_id_writes_nothing_anywhere(workspace: Workspace, tmp_path: Path) -> None:
    before = tree(tmp_path)
    proc = mam("job", "delegate", "--target", "x", "--brief", "hi", "--job-id", "../../pwned")
    assert proc.returncode == 2, proc.stderr
    assert "invalid job id '../../pwned'" in proc.stderr
    assert proc.stdout == ""
    assert not workspace.state.exists()
    assert tree(tmp_path) == before  # no pwned.json, no pwned/ next to the workspace (or anywhere)


@pytest.mark.parametrize(
    "args",
    [
        ["job", "delegate", "--target", "x", "--brief", "hi", "--job-id", ".."],
        ["job", "delegate", "--target", "x", "--brief", "hi", "--parent-job", "../../p"],
        ["job", "delegate", "--target", "x", "--brief", "hi", "--job-id", "."],
        ["job", "status", "../../pwned"],
        ["job", "log", "../pwned"],
        ["job", "cancel", ".."],
        ["job", "send", "../x", "--text", "hi"],
        ["event", "started", "--job", "../../pwned", "--nonce", "n"],
        ["event", "completed", "--job", "../x", "--message", "m"],
        ["event", "progress", "--job", "..", "--message", "m"],
        ["runner", "--name", "..", "--allow-insecure-broker", "--once"],
        ["session", "stop", "--session", "../x"],
        ["session", "resume", "--session", ".."],
        ["routine", "add", "../x", "--target", "w", "--brief", "b", "--every", "1m"],
        ["routine", "add", "r", "--target", "../w", "--brief", "b", "--every", "1m"],
        ["routine", "log", ".."],
        ["routine", "pause", "../x"],
        ["routine", "resume", "x/y"],
        ["routine", "remove", "."],
        ["routine", "run", "../x"],
        ["role", "add", "../x", "--session", "w"],
        ["role", "add", "r", "--session", "../w"],
        ["role", "add", "r", "--session", "w", "--reports-to", "a/b"],
        ["role", "show", ".."],
        ["role", "reset", "../x"],
        ["role", "remove", "."],
        ["task", "add", "t", "--role", "../x"],
        ["task", "add", "t", "--role", "r", "--parent", "../p"],
        ["task", "add", "t", "--role", "r", "--blocked-by", "t-1,../b"],
        ["task", "show", ".."],
        ["task", "done", "../x"],
        ["task", "reopen", "."],
        ["task", "cancel", "x/y"],
        ["event", "completed", "--job", "j", "--disposition", "blocked", "--waiting-on", "../x"],
    ],
)
def test_every_entry_refuses_a_bad_id_with_exit_2_and_leaves_nothing(
    args: list[str], workspace: Workspace, tmp_path: Path
) -> None:
    before = tree(tmp_path)
    proc = mam(*args, env={"MAM_DISPATCH_SECRET": "s"})
    assert proc.returncode == 2, (args, proc.returncode, proc.stderr)
    assert "invalid" in proc.stderr and "starting with a letter or digit" in proc.stderr, proc.stderr
    assert tree(tmp_path) == before, args
