"""The node's connection to each tmux server: one control-mode client (`tmux -C`) per socket.

A job's delivery asks tmux four things (is the pane alive, what the screen shows, the paste with the screen
after it, the Enter), and its monitor lists the sessions and panes every few seconds: as `tmux` processes
each is a client started and reaped, about 2 ms of CPU and 3-4 ms of waiting. The node, which lives long,
instead keeps one client per server in control mode (`tmux -N ... attach-session -t =mam -f no-output,ignore-size`:
it never starts a server, never receives the panes' output and never changes a window's size) and writes each
command to it as a line.
Short-lived processes (a command with MAM_NODE=0, `mam top`) keep one process per call: starting a control
client would cost them more.

What goes through it (`ROUTED`): the commands that only look (the screen, a pane's state, the lists of sessions
and panes) or type, the paste included; never the ones that start a server or a window, take stdin or end
things (`TmuxBackend._exec` decides). A command's text is tmux's own syntax, each argument in single quotes: an
argument holding a quote, a newline or a NUL goes the process way instead, and a paste's bytes go through a 0600
file in a private folder, never a command line (load-buffer reads it through this client).

Framing: tmux answers each command line with `%begin T N F`, its output, and `%end T N F` or
`%error T N F`; a chain with ";" answers a block per command, so a chain's commands are written one at a
time, stopping at the first that fails, as tmux stops a chain. Output is not escaped, so a screen that
shows a line like `%end ...` could end a block early: each command is followed by `display-message -p
TOKEN` (TOKEN random per command, never on a screen), a command's answer is complete only once that
block follows it, and its end is the last `%end`/`%error` line before it that repeats its `%begin`. A
client that exits, times out or answers out of step is closed; the next command starts a new one. A
look (`LOOKS`) that such a client did not answer is asked again as a process; a command that types is
never written again (a paste typed twice is worse than one that failed): it fails as a tmux process that
failed would.
"""

from __future__ import annotations

import os
import secrets
import subprocess
import threading
import time
from pathlib import Path

from mam.util.fdwait import readable

# Commands that only look: asked again as a process when a client fails. ROUTED adds those that type.
LOOKS = frozenset({"capture-pane", "display-message", "list-sessions", "list-panes"})
ROUTED = LOOKS | {"send-keys", "load-buffer", "paste-buffer", "delete-buffer"}
TIMEOUT_S = 20.0
_UNSAFE = ("'", "\n", "\r", "\0")
_ENDS = (b"%end ", b"%error ")

_lock = threading.Lock()
_clients: dict[str, Client] = {}
_folder: Path | None = None  # None: control mode is off in this process


def serve(folder: Path) -> None:
    """Route this process's tmux commands through control clients (the node, at start); `folder`, private
    (0700), holds the pastes' files while tmux reads them."""
    global _folder
    folder.mkdir(mode=0o700, parents=True, exist_ok=True)
    os.chmod(folder, 0o700)
    for stale in folder.glob("*.paste"):
        stale.unlink(missing_ok=True)
    _folder = folder


def close_all() -> None:
    """Stop routing and end every control client (the node, at its end)."""
    global _folder
    with _lock:
        _folder = None
        clients = list(_clients.values())
        _clients.clear()
    for client in clients:
        client.close()


def routable(args: tuple[str, ...], data: bytes | None) -> bool:
    """Whether `args` (commands chained with lone ";") can go through a control client: on, every command
    in ROUTED, no argument tmux's syntax could not hold in single quotes, and no stdin but a paste's."""
    if _folder is None or not args:
        return False
    if data is not None and args[0] != "load-buffer":
        return False
    starts = [0] + [i + 1 for i, a in enumerate(args) if a == ";"]
    if any(i >= len(args) or args[i] not in ROUTED for i in starts):
        return False
    return not any(c in a for a in args for c in _UNSAFE) and _safe(str(_folder))


def run(tmux: str, socket: str, args: tuple[str, ...], data: bytes | None) -> subprocess.CompletedProcess[bytes]:
    """Run `args` (see `routable`) on the server at `socket`, as `tmux -S socket args` would: its
    returncode, stdout and stderr. A paste's `data` replaces the `-` of its load-buffer."""
    folder = _folder
    assert folder is not None
    path = None
    if data is not None:
        path = folder / f"{secrets.token_hex(8)}.paste"
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        first = args.index(";") if ";" in args else len(args)
        i = args.index("-", 0, first)  # load-buffer's stdin: the file instead
        args = (*args[:i], str(path), *args[i + 1 :])
    try:
        client = _client(tmux, socket)
        if client is None:
            return _process(tmux, socket, args)
        out = b""
        for command in _commands(args):  # one at a time: a chain's commands answer in blocks of their own
            try:
                done = client.run(command)
            except Gone as e:
                if all(c[0] in LOOKS for c in _commands(args)):  # asking again changes nothing
                    return _process(tmux, socket, args)
                return subprocess.CompletedProcess(list(args), 1, out, str(e).encode())
            out += done.stdout
            if done.returncode != 0:  # as tmux does: the rest of the chain does not run
                return subprocess.CompletedProcess(list(args), done.returncode, out, done.stderr)
        return subprocess.CompletedProcess(list(args), 0, out, b"")
    finally:
        if path is not None:
            path.unlink(missing_ok=True)


def _process(tmux: str, socket: str, args: tuple[str, ...]) -> subprocess.CompletedProcess[bytes]:
    """No control client could start (no `mam` session yet, a tmux before 3.2): this one command as a
    process (a paste's file is in `args`: tmux reads it itself)."""
    return subprocess.run([tmux, "-S", socket, *args], capture_output=True, timeout=60)


def _client(tmux: str, socket: str) -> Client | None:
    """The live client of the server at `socket`, started if need be; None when none can start. One is
    started at a time, under the lock: tmux 3.3a's server crashed (SIGSEGV) when two control clients
    attached at once and one of them left at once."""
    with _lock:
        client = _clients.get(socket)
        if client is not None and client.alive():
            return client
        _clients.pop(socket, None)
        if client is not None:
            client.close()
        if _folder is None or not os.path.exists(socket):
            return None
        try:
            client = _clients[socket] = Client(tmux, socket)
        except OSError:
            return None
        return client


def _commands(args: tuple[str, ...]) -> list[tuple[str, ...]]:
    """The commands of a chain (separated by lone ";")."""
    out: list[tuple[str, ...]] = [()]
    for arg in args:
        if arg == ";":
            out.append(())
        else:
            out[-1] += (arg,)
    return [c for c in out if c]


def _safe(text: str) -> bool:
    return not any(c in text for c in _UNSAFE)


def _quote(arg: str) -> str:
    return f"'{arg}'"


class Client:
    """One `tmux -S SOCKET -C attach-session` process; `run` writes a command and reads its answer."""

    def __init__(self, tmux: str, socket: str) -> None:
        self.socket = socket
        self._proc = subprocess.Popen(
            # -N: never start a server (attach-session would): a server killed under the node stays gone
            [tmux, "-N", "-S", socket, "-C", "attach-session", "-t", "=mam", "-f", "no-output,ignore-size"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            start_new_session=True,
        )
        self._buf = b""
        self._run_lock = threading.Lock()
        self._dead = False
        try:
            self._sentinel_answer(self._start(("display-message", "-p", "")), time.monotonic() + TIMEOUT_S)
        except OSError:
            self.close()
            raise

    def alive(self) -> bool:
        return not self._dead and self._proc.poll() is None

    def close(self) -> None:
        self._dead = True
        for stream in (self._proc.stdin, self._proc.stdout):
            try:
                if stream is not None:
                    stream.close()
            except OSError:
                pass
        try:
            self._proc.wait(timeout=2)
        except subprocess.TimeoutExpired:
            self._proc.kill()
            self._proc.wait()

    def run(self, args: tuple[str, ...]) -> subprocess.CompletedProcess[bytes]:
        """The command's answer; Gone when the client ended before it answered (it may have run)."""
        with self._run_lock:
            if self._dead:
                raise Gone("the tmux control client ended")
            try:
                token = self._start(args)
                return self._sentinel_answer(token, time.monotonic() + TIMEOUT_S, args)
            except OSError as e:
                self.close()
                raise Gone(f"the tmux control client failed: {e}") from e

    # -- the wire ------------------------------------------------------------------------------
    def _start(self, args: tuple[str, ...]) -> str:
        """Write the command's line and its sentinel's; the sentinel's token."""
        token = f"mam-{secrets.token_hex(16)}"
        line = " ".join(_quote(a) for a in args) + f"\ndisplay-message -p '{token}'\n"
        stdin = self._proc.stdin
        assert stdin is not None
        stdin.write(line.encode("utf-8"))
        stdin.flush()
        return token

    def _sentinel_answer(
        self, token: str, deadline: float, args: tuple[str, ...] = ()
    ) -> subprocess.CompletedProcess[bytes]:
        """Read until the sentinel's block (`%begin`, TOKEN, the matching `%end`); the command's answer
        from what came before it. The buffer is searched, not split line by line: a capture is 200 lines."""
        mark = b"\n" + token.encode() + b"\n"
        seen = 0
        while True:
            at = self._buf.find(mark, seen)
            if at >= 0:
                after = at + len(mark)
                stop = self._buf.find(b"\n", after)
                if stop >= 0:
                    start = self._buf.rfind(b"\n", 0, at) + 1
                    head, tail = self._buf[start:at], self._buf[after:stop]
                    if not (head.startswith(b"%begin ") and tail.startswith(b"%end ")) or (
                        head.split(b" ")[1:] != tail.split(b" ")[1:]
                    ):
                        raise OSError("the tmux control client answered out of step")
                    before, self._buf = self._buf[:start], self._buf[stop + 1 :]
                    return _answer(args, before.split(b"\n")[:-1])
            else:
                seen = max(0, len(self._buf) - len(mark))
            self._read(deadline)

    def _read(self, deadline: float) -> None:
        stdout = self._proc.stdout
        assert stdout is not None
        fd = stdout.fileno()
        left = deadline - time.monotonic()
        if left <= 0 or not readable([fd], left):
            raise OSError("no answer from the tmux control client")
        chunk = os.read(fd, 65536)
        if not chunk:
            raise OSError("the tmux control client exited")
        self._buf += chunk


def _answer(args: tuple[str, ...], lines: list[bytes]) -> subprocess.CompletedProcess[bytes]:
    """The command's block among `lines` (everything read before its sentinel's block): from the first
    `%begin` of a command this client wrote (flags 1; the client's own attach answers with flags 0, and
    under load tmux may print that block after the first commands' answers) to the last line that ends it
    (`%end`/`%error` with the same time, number and flags)."""
    begin = next((i for i, line in enumerate(lines) if line.startswith(b"%begin ") and line.endswith(b" 1")), None)
    if begin is None:
        raise OSError("the tmux control client answered out of step")
    tail = lines[begin].split(b" ")[1:]
    end = max(
        (i for i in range(begin + 1, len(lines)) if lines[i].startswith(_ENDS) and lines[i].split(b" ")[1:] == tail),
        default=None,
    )
    if end is None:
        raise OSError("the tmux control client answered out of step")
    body = b"".join(line + b"\n" for line in lines[begin + 1 : end])
    if lines[end].startswith(b"%error "):
        return subprocess.CompletedProcess(list(args), 1, b"", body)
    return subprocess.CompletedProcess(list(args), 0, body, b"")


class Gone(OSError):
    """The control client ended (or answered out of step) before the command's answer was read."""
