"""codex's own app-server as a delivery channel: a job's brief becomes a turn started through the
app-server the codex TUI in the session's pane is a client of, instead of a paste.

Checked with 0.171.0: `codex app-server --listen unix://PATH` serves its JSON-RPC protocol as
WebSocket messages on a unix socket (it makes PATH a symlink to a 0600 socket in its own 0700
`/tmp/codex-daemon-<uid>/`, and removes both on SIGTERM); `codex --remote unix://PATH` (and
`codex resume <id> --remote unix://PATH`) is a TUI on that server. Another client's `turn/start`
in the TUI's thread shows in the pane as if typed. docs/agents.md, "Delivery channel".

Lifetime: the pane runs this module first (`python -c RUN_MODULE mam.agents.codex_server ...`,
put before codex's argv by SessionOptions.wrap). It starts the app-server as its child, in a
session of its own (the pane's Ctrl-C and hang-up never reach it), with PR_SET_PDEATHSIG: the
kernel sends it SIGTERM when the pane's process ends, however it ends (`/exit`, a killed pane, a
crash, SIGKILL). It waits for the socket, then execs the TUI in the same process (the pane's pid
stays the agent's). No socket within START_S: the TUI starts without the channel (`--no-daemon`,
as before), and deliveries paste.
"""

from __future__ import annotations

import contextlib
import ctypes
import json
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from mam.agents import convo
from mam.agents.base import LaunchContext, SessionOptions
from mam.agents.channel import NoAnswer, Outcome, Refused
from mam.agents.channel import deliver as deliver_in
from mam.outcomes import Exit
from mam.util.poll import Timeout, wait_for
from mam.util.proc import module_argv
from mam.util.websocket import Client

CHANNEL_DIR = "codex-app-server"  # in the session's folder, 0700: the socket and the server's log
SOCKET = "app.sock"
LOG = "app-server.log"
START_S = 30.0  # how long the pane waits for the app-server's socket before starting without it
TIMEOUT_S = 10.0  # each step of a delivery (connect, each message)
NO_DAEMON = "--no-daemon"  # what a TUI without the channel gets (else it attaches to a shared server)
_PR_SET_PDEATHSIG = 1
# The options of a launch that are codex configuration (the app-server runs the threads: it is the one
# that reads them); the rest (--dangerously-bypass-approvals-and-sandbox...) are the TUI's, which sends
# them with the thread it starts.
_CONFIG_OPTIONS = ("-c", "--config", "--enable", "--disable")


def available() -> bool:
    """The channel needs PR_SET_PDEATHSIG (Linux) so the app-server cannot outlive the pane."""
    return sys.platform.startswith("linux")


def channel_dir(state_dir: Path) -> Path:
    return state_dir / CHANNEL_DIR


def config_args(args: Sequence[str]) -> tuple[str, ...]:
    """The `-c key=value`, `--enable X`, `--disable X` pairs among a launch's options."""
    out: list[str] = []
    i = 0
    while i < len(args) - 1:
        if args[i] in _CONFIG_OPTIONS:
            out += [args[i], args[i + 1]]
            i += 2
        else:
            i += 1
    return tuple(out)


def split_argv(argv: Sequence[str], sock: Path) -> tuple[list[str], list[str]]:
    """The app-server's argv and the TUI's, from the TUI's argv as it would run without a channel:
    its configuration goes to the server (the TUI refuses some with `--remote`, e.g.
    `sandbox_workspace_write.writable_roots`), `--remote unix://...` where `--no-daemon` was."""
    config = config_args(argv[1:])
    server = [argv[0], "app-server", "--listen", f"unix://{sock}", *config]
    tui: list[str] = []
    i = 0
    while i < len(argv):
        if i > 0 and argv[i] in _CONFIG_OPTIONS and i + 1 < len(argv):
            i += 2
            continue
        tui += ["--remote", f"unix://{sock}"] if argv[i] == NO_DAEMON else [argv[i]]
        i += 1
    if NO_DAEMON not in argv:
        tui += ["--remote", f"unix://{sock}"]
    return server, tui


def with_channel(options: SessionOptions, ctx: LaunchContext) -> SessionOptions:
    """`options` with the wrap that starts this launch's own app-server, then the TUI on it (`main`)."""
    folder = channel_dir(ctx.state_dir)
    folder.mkdir(mode=0o700, parents=True, exist_ok=True)
    os.chmod(folder, 0o700)
    wrap = module_argv(sys.executable, __name__, str(folder / SOCKET), str(folder / LOG))
    return SessionOptions(args=options.args, env=options.env, wrap=tuple(wrap))


# -- in the pane, before the TUI ---------------------------------------------------------------------


def _die_with_parent(parent: int) -> None:
    """In the app-server's child, before its exec: SIGTERM when the pane's process ends."""
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(_PR_SET_PDEATHSIG, signal.SIGTERM, 0, 0, 0) != 0 or os.getppid() != parent:
        os._exit(Exit.FAILED)  # no guard, or the parent already gone: never run unguarded


def address(sock: Path) -> str:
    """Where to connect: the socket codex's symlink names (in `/tmp/codex-daemon-<uid>/`, short
    whatever the workspace's path: a unix socket's path must fit in 107 bytes)."""
    return os.path.realpath(sock)


def _listening(sock: Path, server: subprocess.Popen[bytes]) -> str:
    if server.poll() is not None:
        return f"exited {server.returncode}"
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
        s.settimeout(2.0)
        try:
            s.connect(address(sock))
        except OSError:
            return ""
    return "up"


def start_server(sock: Path, log: Path, server_argv: Sequence[str]) -> str:
    """Start the app-server tied to this process; "" once its socket takes connections, else why not."""
    with contextlib.suppress(FileNotFoundError):
        sock.unlink()  # a crash's leftover (the symlink codex made): codex will not listen over it
    parent = os.getpid()
    fd = os.open(log, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
    try:
        server = subprocess.Popen(
            list(server_argv),
            stdin=subprocess.DEVNULL,
            stdout=fd,
            stderr=fd,
            start_new_session=True,
            preexec_fn=lambda: _die_with_parent(parent),  # noqa: PLW1509 (single-threaded here)
        )
    except OSError as e:
        return f"cannot start {server_argv[0]} app-server: {e}"
    finally:
        os.close(fd)
    try:
        state = wait_for(lambda: _listening(sock, server), timeout=START_S, interval=0.1)
    except Timeout:
        state = f"no socket at {sock} after {START_S:.0f} s"
    if state == "up":
        return ""
    server.terminate()
    with contextlib.suppress(subprocess.TimeoutExpired):
        server.wait(timeout=5)  # reaped here: the TUI that replaces this process would never wait for it
    return f"codex app-server {state}"


def main(argv: list[str]) -> int:
    """`SOCKET LOG CODEX_ARGV...`: start the app-server, then exec the TUI on it (or, when the server
    does not come up, CODEX_ARGV as it is: the TUI without a channel; deliveries then paste)."""
    sock, log, plain = Path(argv[0]), Path(argv[1]), argv[2:]
    server, tui = split_argv(plain, sock)
    why = start_server(sock, log, server)
    if why:
        print(f"mam: {why}; starting codex without its delivery channel (see {log})", file=sys.stderr)
        tui = plain
    os.execvp(tui[0], tui)
    return Exit.FAILED  # not reached


# -- at delivery ---------------------------------------------------------------------------------------


class _Rpc:
    """codex's JSON-RPC over the WebSocket on its socket. Nothing sent yet: a failure is Refused;
    a request sent and no answer: NoAnswer; an error answer: Refused (the server did nothing)."""

    def __init__(self, sock: Path) -> None:
        try:
            self._ws = Client(address(sock), timeout=TIMEOUT_S)
        except OSError as e:
            raise Refused(f"codex's app-server at {sock} is not reachable: {e}") from None
        self._next = 0

    def call(self, method: str, params: dict[str, Any]) -> Any:
        self._next += 1
        ask = self._next
        try:
            self._ws.send_text(json.dumps({"id": ask, "method": method, "params": params}))
        except OSError as e:
            raise NoAnswer(f"codex's app-server: {method} not sent whole: {e}") from None
        deadline = time.monotonic() + TIMEOUT_S
        while time.monotonic() < deadline:  # its notifications come in between; bounded by TIMEOUT_S
            try:
                message = json.loads(self._ws.recv_text())
            except (OSError, ValueError) as e:
                raise NoAnswer(f"no answer from codex's app-server to {method}: {e}") from None
            if isinstance(message, dict) and message.get("id") == ask and "method" not in message:
                if "error" in message:
                    raise Refused(f"codex's app-server refused {method}: {message['error']}")
                return message.get("result")
        raise NoAnswer(f"no answer from codex's app-server to {method} in {TIMEOUT_S:.0f} s")

    def notify(self, method: str) -> None:
        try:
            self._ws.send_text(json.dumps({"method": method}))
        except OSError as e:
            raise Refused(f"codex's app-server: {method}: {e}") from None

    def close(self) -> None:
        self._ws.close()


def _is_users(thread: Any, cwd: str) -> bool:
    """A thread a person started in the session's folder (not a subagent's)."""
    if not isinstance(thread, dict):
        return False
    source = thread.get("source")
    subagent = isinstance(source, dict) and "subAgent" in source
    return not thread.get("parentThreadId") and not subagent and convo.same_dir(str(thread.get("cwd") or ""), cwd)


def session_thread(rpc: _Rpc, conversation_id: str | None, cwd: str) -> str:
    """The TUI's thread: the session's conversation when mam knows it (it must be loaded), else the one
    loaded thread of the session's folder. This app-server is the session's own: every thread it has
    loaded is this TUI's (a `/new` or `/resume` in it leaves the earlier one loaded too)."""
    rpc.call("initialize", {"clientInfo": {"name": "mam", "title": "mam", "version": "1"}})
    rpc.notify("initialized")
    loaded = [str(t) for t in (rpc.call("thread/loaded/list", {}) or {}).get("data") or []]
    if conversation_id:
        if conversation_id not in loaded:
            raise Refused(f"codex's app-server has not loaded the session's thread {conversation_id} ({loaded})")
        return conversation_id
    found = [
        t
        for t in loaded
        if _is_users((rpc.call("thread/read", {"threadId": t, "includeTurns": False}) or {}).get("thread"), cwd)
    ]
    if len(found) != 1:
        raise Refused(f"codex's app-server has {len(found)} threads of {cwd}, not one: {found}")
    return found[0]


def deliver(state_dir: Path, text: str, conversation_id: str | None, cwd: str) -> Outcome | None:
    """Start a turn holding `text` in the session's thread (mam.agents.channel: what each answer
    means); None: this launch has no channel."""
    folder = channel_dir(state_dir)
    if not folder.is_dir():
        return None
    rpc: _Rpc | None = None

    def find() -> str:
        nonlocal rpc
        sock = folder / SOCKET
        try:
            st, own = sock.stat(), folder.stat()
        except OSError as e:
            raise Refused(f"no app-server socket at {sock}: {e}") from None
        if st.st_uid != os.getuid() or st.st_mode & 0o077 or own.st_uid != os.getuid() or own.st_mode & 0o077:
            raise Refused(f"the app-server socket {sock} or its folder is not private to this user")
        rpc = _Rpc(sock)
        return session_thread(rpc, conversation_id, cwd)

    def start(thread: str) -> None:
        assert rpc is not None
        rpc.call("turn/start", {"threadId": thread, "input": [{"type": "text", "text": text}]})

    try:
        return deliver_in(find, start)
    finally:
        if rpc is not None:
            rpc.close()


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
