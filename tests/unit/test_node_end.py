"""When an autostarted node may end: never while it is answering one of its own operations.

`mam web` autostarts a node and asks it (op `web`) to serve the page; binding and starting the page's server can
take seconds on a loaded machine. A node that counted only the requests it serves as jobs saw nothing in flight
then, ended, and left the page it was starting without an owner (seen in CI: `mam web --stop` then found no page).
"""

from __future__ import annotations

import socket
import threading
from pathlib import Path
from typing import Any

import pytest

from mam.node.server import Node
from mam.node.wire import frame
from mam.protocol import request
from mam.settings import load_settings
from mam.util.poll import wait_for
from mam.workspace import Workspace


def test_a_node_answering_its_own_operation_does_not_end(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MAM_TMUX_SERVER", f"mam-none-{tmp_path.name}")  # no tmux server runs for it
    ws = Workspace(tmp_path)
    ws.ensure_state()
    node = Node(ws, load_settings(env_file=None), autostarted=True)
    listener = node._listen()  # the node's socket is its own: only being idle can end it
    idle = "the workspace's tmux server is not running and no job is open"
    assert node._should_end() == idle

    release = threading.Event()
    entered = threading.Event()

    def slow_control(op: str, args: dict[str, Any]) -> dict[str, Any]:
        entered.set()
        release.wait(10)
        return {"answer": {"op": op}, "exit": 0}

    monkeypatch.setattr(node, "_control", slow_control)
    ours, theirs = socket.socketpair()
    served = threading.Thread(target=node._connection, args=(theirs,), daemon=True)
    served.start()
    try:
        ours.sendall(frame(request("status", {})))
        wait_for(entered.is_set, timeout=10, message="the node never began answering")
        assert node._should_end() == ""  # an operation in flight keeps the node
    finally:
        release.set()
        served.join(10)
        ours.close()
    assert node._should_end() == idle  # answered: idle again
    listener.close()
