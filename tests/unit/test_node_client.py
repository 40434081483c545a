"""The thin client (mam/node/client.py) is the one module that bends around start-up time: it imports
no click, paho, settings, sqlite, pathlib, typing, json or re; and it knows which commands the node serves."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from mam.node.client import command, node_environ

REPO = Path(__file__).resolve().parents[2]


def test_the_client_imports_nothing_slow():
    probe = (
        f"import sys; sys.path.insert(0, {str(REPO)!r}); import mam.node.client; "
        "slow = ('click', 'paho', 'mam.settings', 'mam.cli', 'sqlite3', 'pathlib', 'typing', 'json', 're'); "
        "print(' '.join(m for m in slow if m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-S", "-c", probe], capture_output=True, text=True, check=True)
    assert out.stdout.split() == []


@pytest.mark.parametrize(
    ("argv", "want"),
    [
        (["event", "started", "--job", "j"], "event"),
        (["job", "delegate", "--target", "w", "--brief", "x"], "delegate"),
        (["-w", "/ws", "job", "wait", "job-1"], "wait"),
        (["--workspace=/ws", "--env-file", "e", "job", "delegate"], "delegate"),
        (["job", "delegate", "--help"], None),  # help is click's, here
        (["--help"], None),
        (["job", "status", "job-1"], None),
        (["-w", "/ws", "routine", "add", "r", "--every", "1m"], "routine"),  # routines fire in the node: start it
        (["routine", "run", "r"], "routine"),
        (["routine", "resume", "r"], "routine"),
        (["routine", "list"], None),  # looking starts nothing
        (["routine", "add", "--help"], None),
        (["session", "create"], None),
        (["--version", "job", "delegate"], None),
        ([], None),
    ],
)
def test_which_commands_the_node_serves(argv, want):
    assert command(argv) == want


def test_a_node_starts_without_the_callers_loader_variables():
    env = {"PATH": "/bin", "LD_PRELOAD": "x.so", "LD_LIBRARY_PATH": "/x", "PYTHONPATH": ".", "GCONV_PATH": "/g"}
    assert node_environ(env) == {"PATH": "/bin"}


def test_a_delegation_gets_a_job_id_of_its_own_to_run_again_with():
    from mam.ids import check_job_id
    from mam.node.client import with_job_id

    argv = ["-w", "/ws", "job", "delegate", "--target", "w", "--brief", "x"]
    got = with_job_id(argv)
    assert got[:4] == argv[:4] and got[4] == "--job-id" and got[6:] == argv[4:]
    check_job_id(got[5])
    assert with_job_id(got) == got  # one it has is kept
    assert with_job_id(["job", "delegate", "--job-id=job-1"]) == ["job", "delegate", "--job-id=job-1"]
