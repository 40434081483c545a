"""The tmux backend: one tmux server per workspace on its own socket.

`tmux -L NAME` finds its server at `$TMUX_TMPDIR/tmux-UID/NAME` (TMUX_TMPDIR defaults to /tmp): the
socket depends on the environment of the process that runs tmux, so two processes with different
TMUX_TMPDIR do not see the same server. A session's row records the absolute socket path its
server was made at (`TmuxBackend.socket` when the pane was made), and a backend built for that row
reaches the server with `tmux -S PATH`, whoever runs it (the node serves callers of any
environment). A backend without a recorded socket (a new session; a row made before sockets were
recorded) uses `-L NAME` from this process's environment.

Each mam session is one window (one pane) of the tmux session `mam`, running the launcher,
which execs the agent. Briefs go in with load-buffer (stdin) + paste-buffer -p -r, so any
bytes arrive intact at any size and nothing passes through a shell or a tmux command line.

Every call is one `tmux -L NAME ...` (or `-S PATH`) process (about 4 ms), run directly: libtmux costs about 200 ms
to import and 50 ms per new session, which the delegation path cannot afford. In the node, the calls that
only look or type go through its one control-mode client of the server instead (mam.panes.tmux_control).
A paste and the look at the screen after it are one tmux invocation (commands chained with `;`).
"""

from __future__ import annotations

import os
import subprocess
import uuid
from collections.abc import Mapping, Sequence
from pathlib import Path

from mam.errors import PaneError
from mam.panes import tmux_control
from mam.panes.base import PaneInfo
from mam.settings import Settings
from mam.util.launch import launcher_argv, write_spec
from mam.util.poll import Timeout, wait_for
from mam.util.proc import end_processes, find_program, process_tree, python_bin
from mam.workspace import Workspace

SERVER_EXIT_S = 5.0  # how long a new pane waits out a server exiting as its last session closed
# What tmux says when the server it reached went away under the command (or was never there, and the
# session the command names went with it): the command did not run.
SERVER_GONE = ("server exited unexpectedly", "no server running", "lost server", "can't find session")
KILL_GRACE_S = 2.0  # after a pane's close, then after SIGTERM, before the next signal to what it ran

TMUX_SESSION = "mam"
FORMAT = "#{pane_id}\t#{pane_pid}\t#{pane_dead}\t#{pane_current_command}\t#{pane_current_path}\t#{window_name}"
CONF = """# Written by mam; read only when mam starts this tmux server.
set -g remain-on-exit on
set -g history-limit 20000
set -g default-size 200x50
set -g automatic-rename off
set -g allow-rename off
set -g exit-empty on
set -s escape-time 0
"""


def socket_path(name: str) -> Path:
    """The socket `tmux -L NAME` run by this process uses: `$TMUX_TMPDIR/tmux-UID/NAME`, absolute."""
    base = os.environ.get("TMUX_TMPDIR") or "/tmp"
    return Path(os.path.abspath(base)) / f"tmux-{os.getuid()}" / name


class TmuxBackend:
    kind = "tmux"

    def __init__(self, server: str, *, settings: Settings, ws: Workspace, socket: str = "") -> None:
        """`socket`: the server's recorded socket path (reached with `-S`); "" for `-L server` from this
        process's environment."""
        self.server = server
        self.settings = settings
        self.ws = ws
        self.recorded = socket

    @property
    def socket(self) -> str:
        """The absolute path of the server's socket: the recorded one, else the one `-L` finds now."""
        return self.recorded or str(socket_path(self.server))

    def _socket(self) -> Path:
        return Path(self.socket)

    # -- raw commands -------------------------------------------------------------------------
    def _exec(self, *args: str, conf: bool = False, data: bytes | None = None) -> subprocess.CompletedProcess[bytes]:
        """One tmux process on this server's socket: `args` may chain commands with a lone ";"."""
        where = ("-S", self.recorded) if self.recorded else ("-L", self.server)
        try:
            if not conf and tmux_control.routable(args, data):
                return tmux_control.run(_tmux(), self.socket, args, data)
            argv = [_tmux(), *where, *(("-f", str(self._conf())) if conf else ()), *args]
            return subprocess.run(argv, input=data, capture_output=True, timeout=60)
        except FileNotFoundError as e:
            raise PaneError("tmux is not installed (apt-get install tmux / brew install tmux)") from e

    def _conf(self) -> Path:
        path = self.ws.state / "tmux.conf"
        if not path.exists() or path.read_text() != CONF:
            self.ws.ensure_state()
            path.write_text(CONF)
        return path

    def _run(self, *args: str, check: bool = True, conf: bool = False, data: bytes | None = None) -> str:
        done = self._exec(*args, conf=conf, data=data)
        if check and done.returncode != 0:
            raise PaneError(f"tmux {args[0]} failed on server {self.server!r}: {_err(done)}", server=self.server)
        return done.stdout.decode("utf-8", "replace").rstrip("\n")

    # -- server -------------------------------------------------------------------------------
    def server_running(self) -> bool:
        if not self._socket().exists():
            return False  # never let a probe start anything or leave a socket behind
        return self._exec("list-sessions").returncode == 0

    def server_pid(self) -> int:
        """The tmux server's pid; 0 if none runs (asking never starts one)."""
        if not self._socket().exists():
            return 0
        done = self._exec("display-message", "-p", "#{pid}")
        text = done.stdout.decode("ascii", "replace").strip()
        return int(text) if done.returncode == 0 and text.isdigit() else 0

    def ensure_server(self) -> None:
        if self.server_running():
            return
        if self.settings.no_autostart:
            raise PaneError(f"tmux server {self.server!r} is not running and MAM_NO_AUTOSTART=1", server=self.server)
        # The server starts with its first pane (create_pane): no placeholder process is needed.

    def _socket_folder(self) -> None:
        """Before a server starts on a recorded socket: its `tmux-UID` folder, made as `-L` would make it
        (0700; a reboot empties /tmp). `-S` makes no folder; the TMUX_TMPDIR above it must exist."""
        folder = self._socket().parent
        if not self.recorded or folder.is_dir():
            return
        try:
            folder.mkdir(mode=0o700)
        except FileExistsError:
            pass
        except OSError as e:
            raise PaneError(f"cannot make the folder of tmux socket {self.recorded}: {e}", server=self.server) from e

    def _has_session(self) -> bool:
        return self.server_running() and self._exec("has-session", "-t", f"={TMUX_SESSION}").returncode == 0

    # -- panes --------------------------------------------------------------------------------
    def create_pane(self, *, name: str, argv: Sequence[str], cwd: str, env: Mapping[str, str]) -> PaneInfo:
        if self.settings.no_autostart and not self.server_running():
            raise PaneError(f"tmux server {self.server!r} is not running and MAM_NO_AUTOSTART=1", server=self.server)
        spec = write_spec(self.ws.run_dir, argv=argv, cwd=cwd, env=env)
        command = launcher_argv(python_bin(self.settings.agent_python_bin), spec)
        # The window name is informative only; panes are addressed by their id.
        window = _window_name(name)
        try:
            # A server whose last session just closed (a stop, then a resume) exits on its own (exit-empty), and a
            # command that reaches it on its way out fails with "server exited unexpectedly" without running; so
            # does one that finds its socket before it is gone. The next try starts a new server.
            out = wait_for(
                lambda: self._new_pane(window, cwd, command),
                timeout=SERVER_EXIT_S,
                interval=0.02,
                message=lambda: f"tmux server {self.server!r} kept exiting as a pane was made",
            )
        except Timeout as e:
            spec.unlink(missing_ok=True)
            raise PaneError(str(e), server=self.server) from e
        except PaneError:
            spec.unlink(missing_ok=True)
            raise
        info = _parse(out.strip().splitlines()[0])
        if info is None:
            raise PaneError(f"tmux did not report the new pane: {out!r}", server=self.server)
        return info

    def _new_pane(self, window: str, cwd: str, command: Sequence[str]) -> str:
        """One try at a new window in session `mam` (a new session, and server, if there is none): tmux's
        report of the pane, or "" when the server exited under the command (try again)."""
        if self._has_session():
            verb, where = "new-window", ("-t", f"={TMUX_SESSION}:")
        else:
            self._socket_folder()
            verb, where = "new-session", ("-s", TMUX_SESSION)
        args = (verb, "-d", "-P", "-F", FORMAT, *where, "-n", window, "-c", cwd, "--", *command)
        done = self._exec(*args, conf=verb == "new-session")
        if done.returncode == 0:
            return done.stdout.decode("utf-8", "replace").rstrip("\n")
        err = _err(done)
        if any(gone in err for gone in SERVER_GONE):
            return ""
        raise PaneError(f"tmux {verb} failed on server {self.server!r}: {err}", server=self.server)

    def pane(self, pane_id: str) -> PaneInfo | None:
        if not pane_id.startswith("%") or not self._socket().exists():
            return None  # no server: nothing to ask (and nothing gets started)
        # One call: display-message on a pane that is gone (or a server that is not running) fails.
        out = self._exec("display-message", "-p", "-t", pane_id, FORMAT)
        lines = out.stdout.decode("utf-8", "replace").splitlines()
        if out.returncode == 0 and lines:
            return _parse(lines[0])
        err = _err(out)
        if "can't find" in err or "no server running" in err or "server exited" in err or not err:
            return None
        # Anything else is not an answer about the pane: never report a live pane as gone.
        raise PaneError(f"tmux display-message failed on server {self.server!r}: {err}", server=self.server)

    def exit_status(self, pane_id: str) -> int | None:
        if not pane_id.startswith("%") or not self._socket().exists():
            return None
        for kicked in (False, True):
            out = self._exec(
                "display-message", "-p", "-t", pane_id, "#{pane_dead}\t#{pane_dead_status}\t#{pane_dead_signal}"
            )
            dead, status, signal = (out.stdout.decode("utf-8", "replace").strip("\n").split("\t") + ["", ""])[:3]
            if out.returncode != 0 or dead != "1":
                return None
            if status.lstrip("-").isdigit():
                return int(status)
            if signal or kicked:
                return None
            # tmux 3.3a at times misses the SIGCHLD of a program that exits at once: the pane reads dead, its
            # process stays a zombie with no status, until another child of the server ends and the server
            # reaps them all (it also marks a pane dead a moment before it reaps it). A job of its own
            # (`run-shell true`) is such a child, and the command returns once the server has reaped it.
            self._exec("run-shell", "true")
        return None

    def panes(self) -> list[PaneInfo]:
        if not self.server_running():
            return []
        # A failed listing is an error, never "no panes": a caller must not conclude that panes are gone.
        out = self._run("list-panes", "-a", "-F", FORMAT)
        return [p for p in (_parse(line) for line in out.splitlines()) if p is not None]

    def paste(self, pane_id: str, text: str) -> None:
        self._paste(pane_id, text)

    def paste_and_capture(self, pane_id: str, text: str, lines: int = 200) -> str:
        return self._paste(pane_id, text, capture=lines)

    def _paste(self, pane_id: str, text: str, capture: int = 0) -> str:
        """load-buffer from stdin (no size limit; set-buffer stops at ~16 KB) + paste-buffer (+ capture-pane)
        in one tmux process: tmux runs the chain in order and stops at the first command that fails."""
        buffer = f"mam-{uuid.uuid4().hex[:12]}"
        # -p: bracketed paste if the program enabled it; -r: keep LF as LF; -d: delete the buffer.
        chain = ["load-buffer", "-b", buffer, "-", ";", "paste-buffer", "-p", "-r", "-d", "-b", buffer, "-t", pane_id]
        if capture:
            chain += [";", "capture-pane", "-p", "-J", "-t", pane_id, "-S", f"-{max(1, capture)}"]
        done = self._exec(*chain, data=text.encode("utf-8"))
        if done.returncode != 0:
            self._exec("delete-buffer", "-b", buffer)  # a paste that failed may leave it behind
            raise PaneError(f"tmux paste failed on server {self.server!r}: {_err(done)}", server=self.server)
        return done.stdout.decode("utf-8", "replace").rstrip("\n")

    def send_keys(self, pane_id: str, *keys: str) -> None:
        if keys:
            self._run("send-keys", "-t", pane_id, *keys)

    def type_text(self, pane_id: str, text: str) -> None:
        if text:
            self._run("send-keys", "-t", pane_id, "-l", "--", text)

    def capture(self, pane_id: str, lines: int = 200) -> str:
        if not self._socket().exists():
            return ""  # (capture-pane never starts a server: without one it fails, and this says "")
        return self._run("capture-pane", "-p", "-J", "-t", pane_id, "-S", f"-{max(1, lines)}", check=False)

    def kill_pane(self, pane_id: str) -> None:
        if not self.server_running():
            return
        info = self.pane(pane_id)
        procs = process_tree(info.pid) if info is not None and info.pid and not info.dead else []
        self._run("kill-pane", "-t", pane_id, check=False)
        # Closing the pane hangs up on its program; one that ignores that (or hangs on its way out, as an
        # opencode did once under load, spinning a core as an orphan) is ended, with its children: SIGTERM
        # after KILL_GRACE_S, SIGKILL after as long again.
        end_processes(procs, grace=KILL_GRACE_S)

    def kill_server(self) -> None:
        if self.server_running():
            self._exec("kill-server")
        self._socket().unlink(missing_ok=True)


def _tmux() -> str:
    """tmux's absolute path, from this process's PATH without its relative entries (never a `tmux`
    planted in a working folder); FileNotFoundError when there is none."""
    found = find_program("tmux")
    if found is None:
        raise FileNotFoundError("tmux")
    return found


def _err(done: subprocess.CompletedProcess[bytes]) -> str:
    return " ".join(done.stderr.decode("utf-8", "replace").split("\n")).strip()


def _window_name(name: str) -> str:
    return "".join(c if c.isalnum() or c in "-_." else "_" for c in name)[:64] or "agent"


def _parse(line: str) -> PaneInfo | None:
    parts = line.split("\t")
    if len(parts) != 6 or not parts[0].startswith("%"):
        return None
    pane_id, pid, dead, command, cwd, name = parts
    return PaneInfo(
        pane_id=pane_id, pid=int(pid) if pid.isdigit() else None, dead=dead == "1", command=command, cwd=cwd, name=name
    )
