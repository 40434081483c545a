"""`mam routine list` is a table under a header that names each column, so `skip  skip` reads as the
routine's --concurrency and --catch-up, not as a riddle."""

from __future__ import annotations

from mam.workspace import Workspace
from tests.helpers.mamcli import mam

LOCAL = {"MAM_NODE": "0"}  # the operation in this process: no node is started for it


def test_the_list_has_a_header_naming_concurrency_and_catch_up(workspace: Workspace) -> None:
    assert mam("routine", "list", check=True).stdout == "no routines\n"
    mam("routine", "add", "nightly", "--target", "w", "--brief", "tick", "--every", "1h", env=LOCAL, check=True)
    mam(
        "routine", "add", "busy", "--target", "w", "--brief", "tick", "--every", "2h", "--concurrency", "queue",
        "--catch-up", "once", env=LOCAL, check=True,
    )  # fmt: skip
    lines = mam("routine", "list", check=True).stdout.splitlines()
    assert lines[0].split() == ["NAME", "STATE", "SCHEDULE", "NEXT", "CONCURRENCY", "CATCH-UP", "LAST", "TARGET"]
    rows = {line.split()[0]: line for line in lines[1:]}
    assert sorted(rows) == ["busy", "nightly"], lines
    start = lines[0].index("CONCURRENCY")
    assert rows["nightly"][start:].split()[:2] == ["skip", "skip"]
    assert rows["busy"][start:].split()[:2] == ["queue", "once"]
    assert rows["busy"].rstrip().endswith(" w") and "/" not in rows["busy"][start : lines[0].index("LAST")]
    help_text = mam("routine", "list", "--help", check=True).stdout
    assert "CONCURRENCY (what a" in help_text and "CATCH-UP (the ticks" in help_text
