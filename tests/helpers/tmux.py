"""A private tmux server per test: a unique socket name, killed by its own handle."""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from pathlib import Path

import libtmux

from mam.panes.tmux import socket_path
from mam.util.proc import end_processes, process_tree


@dataclass
class PrivateTmux:
    name: str
    server: libtmux.Server

    def kill(self) -> None:
        """Kill the server and, after it, whatever ran in its panes and ignored the hang-up (an agent stuck
        on its way out would otherwise spin as an orphan through the rest of the run). The server's own
        process is waited for too, and signalled if a `kill-server` that failed left it running: with its
        socket removed below, nothing could find it again (a fault schedule of 2026-12-07 left a server and a
        node's control client behind; a `kill-server` that failed is one way to get there)."""
        procs: list[tuple[int, int]] = []
        if socket_path(self.name).exists():
            try:
                listed = self.server.cmd("list-panes", "-a", "-F", "#{pane_pid}").stdout
                server = self.server.cmd("display-message", "-p", "#{pid}").stdout
            except Exception:
                listed, server = [], []
            for pid in server[:1]:
                procs += process_tree(int(pid))[:1] if pid.strip().isdigit() else []  # the server alone
            for pid in listed:
                procs += process_tree(int(pid)) if pid.strip().isdigit() else []
            try:
                self.server.kill()
            except Exception:
                pass
        socket_path(self.name).unlink(missing_ok=True)
        end_processes(procs, grace=2.0)

    def running(self) -> bool:
        return socket_path(self.name).exists() and self.server.is_alive()


def private_tmux() -> PrivateTmux:
    return private_tmux_named(f"mamtest-{uuid.uuid4().hex[:10]}")


def private_tmux_named(name: str) -> PrivateTmux:
    """A handle on the tmux server of that socket name (nothing is started)."""
    return PrivateTmux(name, libtmux.Server(socket_name=name))


def kill_stray_default_server(root: Path) -> str:
    """The tmux server mam names by itself for the workspace at `root` (`mam-<slug>`, used when a
    command ran without MAM_TMUX_SERVER): killed if a test started it; its name, else ""."""
    from mam.workspace import workspace_slug

    stray = private_tmux_named(f"mam-{workspace_slug(root)}")
    if stray.running() or socket_path(stray.name).exists():
        stray.kill()
        return stray.name
    return ""
