"""The PaneBackend protocol every backend implements, and what it reports about a pane.

Rules every backend keeps:
- looking (`server_running`, `pane`, `panes`, `capture`) never starts a server or a pane;
- text reaches a pane byte-exact and never passes through a shell;
- a pane runs `argv` directly (no shell), with exactly `env`, in `cwd`;
- a backend given a recorded `socket` reaches the server there, whatever this process's environment.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Protocol, runtime_checkable


@dataclass(frozen=True)
class PaneInfo:
    pane_id: str
    pid: int | None  # the pane's own process: the agent (launched by exec, no shell in between)
    dead: bool  # the process exited and the pane was kept for inspection
    command: str  # the pane's current foreground command, as the backend reports it
    cwd: str
    name: str  # the name given at creation (the mam session name)

    def as_dict(self) -> dict[str, object]:
        return {
            "pane_id": self.pane_id,
            "pid": self.pid,
            "dead": self.dead,
            "command": self.command,
            "cwd": self.cwd,
            "name": self.name,
        }


@runtime_checkable
class PaneBackend(Protocol):
    kind: str
    server: str

    @property
    def socket(self) -> str:
        """The absolute path of the server's socket: the one recorded for it, else where this process finds it."""
        ...

    def server_running(self) -> bool:
        """True if the server answers; never starts it and creates no socket."""
        ...

    def ensure_server(self) -> None:
        """Start the server if it is not running (refused with MAM_NO_AUTOSTART=1)."""
        ...

    def create_pane(self, *, name: str, argv: Sequence[str], cwd: str, env: Mapping[str, str]) -> PaneInfo:
        """A new pane running `argv` with exactly `env` in `cwd`; the pane stays after the program exits."""
        ...

    def pane(self, pane_id: str) -> PaneInfo | None:
        """The pane, or None if it is gone (or the server is not running)."""
        ...

    def panes(self) -> list[PaneInfo]:
        """Every pane of the server ([] when it is not running)."""
        ...

    def exit_status(self, pane_id: str) -> int | None:
        """The exit status of a dead pane's program (None: alive, gone, or the backend does not keep it)."""
        ...

    def paste(self, pane_id: str, text: str) -> None:
        """Deliver `text` byte-exact as one paste (bracketed if the program asked for it); no Enter."""
        ...

    def paste_and_capture(self, pane_id: str, text: str, lines: int = 200) -> str:
        """`paste`, then `capture` (what the pane shows once the paste is in), in as few calls as the backend allows."""
        ...

    def send_keys(self, pane_id: str, *keys: str) -> None:
        """Press named keys: Enter, Escape, Tab, C-c, C-d, BSpace..."""
        ...

    def type_text(self, pane_id: str, text: str) -> None:
        """Type short literal text (an exit command such as `/exit`), no Enter."""
        ...

    def capture(self, pane_id: str, lines: int = 200) -> str:
        """The last `lines` lines of the pane's screen and scrollback, as text."""
        ...

    def kill_pane(self, pane_id: str) -> None:
        """Close the pane and end its process (no error if it is already gone)."""
        ...

    def kill_server(self) -> None:
        """Stop the whole server and remove what it leaves behind (socket files)."""
        ...
