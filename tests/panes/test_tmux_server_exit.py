"""A new pane made while the workspace's tmux server is on its way out (its last session just closed).

tmux runs with exit-empty on: stopping the last session's agent ends the server, and a `tmux new-session`
that reaches it in that moment fails with "server exited unexpectedly" without running (seen in CI: a
resume right after a stop). The server on its way out is played here by what it is to a client: a socket
that accepts and closes each connection; then the socket goes and a real server can start.
"""

from __future__ import annotations

import os
import socket
import sys
import threading
from pathlib import Path

from mam.panes.tmux import TmuxBackend
from mam.panes.tmux import socket_path as tmux_socket
from mam.settings import load_settings
from mam.workspace import Workspace

EXITING_LOOKS = 4  # connections the exiting server takes (and drops) before its socket is gone


class ExitingServer:
    """A listener at a tmux socket that closes every connection, then removes its socket after `looks`."""

    def __init__(self, path: Path, looks: int) -> None:
        path.parent.mkdir(mode=0o700, exist_ok=True)
        self.path = path
        self.looks = looks
        self.taken = 0
        self.listener = socket.socket(socket.AF_UNIX)
        self.listener.bind(str(path))
        self.listener.listen(8)
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.thread.start()

    def _serve(self) -> None:
        while self.taken < self.looks:
            conn, _ = self.listener.accept()
            conn.close()
            self.taken += 1
        self.path.unlink()
        self.listener.close()


def test_a_pane_made_as_the_server_exits_starts_a_new_server(
    workspace: Workspace, tmux_server, tmp_path: Path, poll
) -> None:
    path = tmux_socket(tmux_server.name)
    exiting = ExitingServer(path, EXITING_LOOKS)
    backend = TmuxBackend(tmux_server.name, settings=load_settings(env_file=None), ws=workspace)
    out = tmp_path / "ran"
    argv = [sys.executable, "-c", f"open({str(out)!r}, 'w').write('ran')"]

    info = backend.create_pane(name="agent", argv=argv, cwd=str(tmp_path), env={"PATH": os.environ["PATH"]})

    exiting.thread.join(timeout=10)
    assert exiting.taken == EXITING_LOOKS  # every try before the socket went reached the exiting server
    assert info.pane_id.startswith("%")
    poll(out.exists, timeout=20, message="the pane made after the old server went never ran its program")
    assert backend.server_pid() > 0


def test_a_resume_right_after_the_last_stop_finds_a_server(workspace: Workspace, tmux_server, tmp_path: Path) -> None:
    """The real race, many times over: close the only pane (the server exits), make the next one at once."""
    backend = TmuxBackend(tmux_server.name, settings=load_settings(env_file=None), ws=workspace)
    env = {"PATH": os.environ["PATH"]}
    for n in range(25):
        info = backend.create_pane(name=f"a{n}", argv=["sleep", "60"], cwd=str(tmp_path), env=env)
        backend.kill_pane(info.pane_id)
    backend.kill_server()
