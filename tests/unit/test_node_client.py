"""The client side of the node protocol (mam/node/client.py, mam/node/front.py) is the one place that bends
around start-up time: it imports no click, paho, settings, sqlite, pathlib, typing, json or re; it knows which
commands are its own; and it parses their command lines from the protocol's declarations (mam/protocol.py)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from mam.node.client import node_environ
from mam.node.front import Usage, command, delegate_args, parse
from mam.protocol import OPS, Invalid, check_request, request

REPO = Path(__file__).resolve().parents[2]
SLOW = ("click", "paho", "mam.settings", "mam.cli", "sqlite3", "pathlib", "typing", "json", "re", "dataclasses", "enum")


@pytest.mark.parametrize("module", ["mam.node.client", "mam.node.front", "mam.protocol"])
def test_the_client_imports_nothing_slow(module):
    probe = (
        f"import sys; sys.path.insert(0, {str(REPO)!r}); import {module}; "
        f"print(' '.join(m for m in {SLOW!r} if m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-S", "-c", probe], capture_output=True, text=True, check=True)
    assert out.stdout.split() == []


@pytest.mark.parametrize(
    ("argv", "want"),
    [
        (["event", "started", "--job", "j"], ("event", ["started", "--job", "j"], None)),
        (["job", "delegate", "--target", "w", "--brief", "x"], ("delegate", ["--target", "w", "--brief", "x"], None)),
        (["-w", "/ws", "job", "wait", "job-1"], ("wait", ["job-1"], "/ws")),
        (["--workspace=/ws", "job", "delegate"], ("delegate", [], "/ws")),
        (["--env-file", "e", "job", "delegate"], None),  # click's: it refuses --env-file for a node operation
        (["job", "delegate", "--help"], None),  # help is click's
        (["event", "bogus"], None),  # click says there is no such command
        (["--help"], None),
        (["job", "status", "job-1"], None),
        (["routine", "add", "r", "--every", "1m"], None),
        (["--version", "job", "delegate"], None),
        ([], None),
    ],
)
def test_which_commands_are_the_lean_front_ends(argv, want):
    assert command(argv) == want


def test_a_node_starts_without_the_callers_loader_variables():
    env = {"PATH": "/bin", "LD_PRELOAD": "x.so", "LD_LIBRARY_PATH": "/x", "PYTHONPATH": ".", "GCONV_PATH": "/g"}
    assert node_environ(env) == {"PATH": "/bin"}


def test_the_delegate_command_line_is_parsed_by_its_declaration():
    values, own, ws = delegate_args(
        ["--target=w", "--brief", "--json", "--timeout", "5", "--dedup", "--json", "-w", "/ws", "--brief-file=-"]
    )
    assert values == {"target": "w", "brief": "--json", "timeout_s": 5.0, "dedup": True}
    assert own == {"json": True, "brief-file": "-"} and ws == "/ws"


@pytest.mark.parametrize(
    ("argv", "said"),
    [
        (["--target"], "option --target requires an argument"),
        (["--bogus"], "no such option: --bogus"),
        (["--dedup=yes"], "option --dedup does not take a value"),
        (["--timeout", "soon"], "--timeout: 'soon' is not a number"),
        (["--max-tokens", "1.5"], "--max-tokens: '1.5' is not a whole number"),
        (["stray"], "unexpected argument 'stray'"),
    ],
)
def test_a_bad_command_line_is_one_usage_error_naming_the_option(argv, said):
    with pytest.raises(Usage, match=said):
        delegate_args(argv)


def test_every_field_is_checked_by_both_ends():
    with pytest.raises(Invalid, match="missing option --target"):
        request("delegate", {"brief": "x"})
    with pytest.raises(Invalid, match="--timeout must be a positive, finite number of seconds"):
        request("delegate", {"target": "w", "brief": "x", "timeout_s": 0})
    with pytest.raises(Invalid, match="invalid job id"):
        request("wait", {"job": "../x"})
    with pytest.raises(Invalid, match="unknown field"):
        request("cancel", {"job": "j-1", "force": True})
    with pytest.raises(Invalid, match="--mode must be one of safe, quick, hard"):
        request("pause", {"job": "j-1", "mode": "gentle"})
    # The node trusts nothing: a frame with another version, operation or a field of the wrong type is refused.
    for frame in (
        {"v": 2, "op": "status"},
        {"v": 1, "op": "exec"},
        {"v": 1, "op": "wait", "args": {"job": 7}},
        {"v": 1, "op": "wait", "args": {"job": "j-1"}, "settings": {"PATH": "."}},
    ):
        with pytest.raises(Invalid):
            check_request(frame)
    assert check_request(request("wait", {"job": "j-1", "timeout_s": 0}, {"MAM_POLL_S": "1"})) == (
        "wait",
        {"job": "j-1", "timeout_s": 0.0},
        {"MAM_POLL_S": "1"},
    )


def test_every_operation_declares_typed_fields():
    for op, fields in OPS.items():
        for f in fields:
            assert f.kind in (str, bool, int, float, list), (op, f.name)
            assert f.help, (op, f.name)


def test_the_parser_takes_only_the_declared_spelling():
    fields = {f.flag: f for f in OPS["wait"] if f.flag}
    assert parse(["job-1", "--timeout=0"], fields, ("--json",), positional=1)[:3] == (
        {"timeout_s": 0.0},
        {},
        ["job-1"],
    )


# A node that answers `stop`, stops listening at once, then winds up until the test lets it end (as a node does:
# its routines' webhook, its monitor, its heartbeats' hand-over, its broker).
LINGERING_NODE = """
import os, socket, sys
sys.path.insert(0, sys.argv[2])
from mam.node.wire import Frames, frame
from mam.util.private import address
os.umask(0o177)  # a node's socket is 0600: the client trusts no other
where, _fd = address(sys.argv[1])
listener = socket.socket(socket.AF_UNIX)
listener.bind(where)
listener.listen(1)
conn, _ = listener.accept()
frames, got = Frames(), []
while not got:
    got = frames.feed(conn.recv(65536))
conn.sendall(frame({"answer": {"stopping": True, "pid": os.getpid()}, "exit": 0}))
conn.close()
listener.close()
os.unlink(sys.argv[1])
sys.stdin.readline()  # winding up, until the test says it is done
"""


def test_stop_returns_once_the_nodes_process_has_ended_not_when_its_socket_has(tmp_path, monkeypatch):
    """`mam node stop` once returned as soon as the node stopped answering; a test then found the routines'
    webhook port still held by the node on its way out. `stop` now also waits for the node's process to end.
    The fake node ends only after `stop` has found its socket gone twice: a client that returns at the first
    look returns while the node still runs."""
    from mam.node import client
    from mam.util.poll import wait_for
    from mam.util.proc import pid_alive

    path = tmp_path / "node.sock"
    node = subprocess.Popen([sys.executable, "-c", LINGERING_NODE, str(path), str(REPO)], stdin=subprocess.PIPE)
    real_connect, looks = client.connect, []

    def connect(where: str):  # type: ignore[no-untyped-def]
        sock = real_connect(where)
        if sock is None:
            looks.append(where)
            if len(looks) == 2:
                assert node.stdin is not None
                node.stdin.close()  # its wind-up is over: it ends
        return sock

    monkeypatch.setattr(client, "connect", connect)
    try:
        wait_for(path.exists, timeout=30, message="the fake node never listened")
        answer, gone = client.stop(str(path), wait_s=30)
        assert answer is not None and answer["pid"] == node.pid and gone
        assert not pid_alive(node.pid)  # ended (a zombie until reaped here), not merely deaf
    finally:
        node.kill()
        node.wait(timeout=30)
