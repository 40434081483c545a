"""The client side of the node protocol: hand one typed request (mam.protocol) to the workspace's node and
read its frames back.

This module and mam.node.front are the one place that bends around start-up time: they run at the start
of every `mam event` and `mam job delegate`, before (and instead of) click, and import only `_socket`,
`_signal`, `os`, `sys`, `time`, mam.node.wire and mam.protocol (no `json`, `re` or `typing`).

`exchange` connects to `.mam/run/node.sock` (only a socket of this user, mode 0600, in the 0700 run
folder), starting a node in the background when none runs and the operation is one that needs it
(mam.protocol.STARTS_NODE; unless MAM_NO_AUTOSTART=1), sends the request and hands each frame to
`on_frame` until the final one, which it returns. None means "not served": no node runs (an agent's
event, a look), MAM_NODE=0 says so, or none could be started; the caller then runs the operation in its
own process, the same Service (mam.node.local). Nothing but the request travels: no descriptor,
environment (beyond the request's settings variables) or folder.

- Interrupted (SIGINT, SIGTERM, SIGHUP: the `mam` script only, `signals=True`), it tells the node
  (`{"leave": signum}`), which runs the operation on, and raises Gone with the jobs it named.
- The node gone before it took the request (one being killed still accepts a connection): the request
  goes to a new node. Gone after it took it: a request that may run twice is sent again to a new node
  (a delegation or a fan-out carries its job ids, so the next node takes its jobs over and never types a
  brief twice; a wait waits again); an agent's event runs here; any other answers `lost`.
"""

from __future__ import annotations

import _signal
import _socket
import os
import sys
import time

from mam.node.wire import LOCK, LOG, SOCKET, Frames, frame
from mam.protocol import STARTS_NODE
from mam.util.private import address, check_folder, private
from mam.util.root import STATE_DIR, find_root

TYPE_CHECKING = False  # not `typing`'s: importing it costs the client ~5 ms of its start
if TYPE_CHECKING:
    from typing import Any

FORWARDED = (_signal.SIGINT, _signal.SIGTERM, _signal.SIGHUP)
START_WAIT_S = 20.0  # for a node just started to listen (imports, on a loaded 2-core machine)
STOP_WAIT_S = 15.0  # for a node asked to stop to let go of its socket and end
NODE_START = "import sys; del sys.path[0]; from mam.node.server import main; sys.exit(main())"
AGAIN = frozenset({"delegate", "wait", "fanout"})  # may run again in a new node (their jobs are taken over)
_OFF = frozenset({"0", "false", "no", "off"})


def flag(environ: Any, name: str, default: bool) -> bool:
    value = environ.get(name)
    if value is None or not value.strip():
        return default
    return value.strip().strip("'\"").lower() not in _OFF


class Gone(Exception):
    """The caller was interrupted while the node ran its operation: the node runs it on. `jobs`: the jobs
    the operation named (to follow with `mam job wait`); `signum`: the signal."""

    def __init__(self, signum: int, jobs: list[str]) -> None:
        super().__init__(signum)
        self.signum, self.jobs = signum, jobs


def workspace(explicit: str | None) -> str | None:
    """The workspace's root if its run folder is plainly this user's (else None: the caller's process says why)."""
    root = find_root(explicit)
    if root is None or check_folder(os.path.join(root, STATE_DIR, "run")):
        return None
    return root


def exchange(
    root: str, request: dict[str, Any], on_frame: Any, *, signals: bool = False, environ: Any = None
) -> dict[str, Any] | None:
    """Run `request` in `root`'s node: its final frame (`answer`/`error`/`left`/`lost`, with `exit`); None when
    no node serves it (run it here). `on_frame`: told each other frame. `signals`: the `mam` script's own
    interrupts are the node's to know (Gone). `environ`: whose MAM_NO_AUTOSTART counts (default: this
    process's)."""
    environ = os.environ if environ is None else environ
    op = request["op"]
    run_dir = os.path.join(root, STATE_DIR, "run")
    starts = op in STARTS_NODE and not flag(environ, "MAM_NO_AUTOSTART", False)
    talk = _Talk(request, on_frame, signals)
    for _attempt in range(3):
        sock = connect(os.path.join(run_dir, SOCKET)) or (start(root, run_dir, environ) if starts else None)
        if sock is None:
            return None
        final = talk.over(sock)
        if final is not None:
            return final
        if talk.refused:
            return None
        if talk.accepted:  # it died while it ran the operation
            if op == "event":
                return None  # run here (if the node stored it before it died, the copy is refused by its seq)
            if op not in AGAIN:
                return {"lost": "the node ended before it answered; see .mam/run/node.log", "exit": 1}
            _say(f"mam: the node ended; asking a new one to {op} again\n", signals)
        starts = starts or op in AGAIN
    return None


class _Talk:
    """One request's exchange with a node (tried again with the next node if one dies under it)."""

    def __init__(self, request: dict[str, Any], on_frame: Any, signals: bool) -> None:
        self.data = frame(request)
        self.on_frame = on_frame
        self.signals = signals
        self.accepted = self.refused = False
        self.jobs: list[str] = []
        self.signum = 0
        self.sock: _socket.socket | None = None

    def over(self, sock: _socket.socket) -> dict[str, Any] | None:
        """The final frame from the node on `sock`; None when it went away first (`accepted` says whether it
        had taken the request) or refused it (`refused`)."""
        self.sock, self.accepted = sock, False
        frames = Frames()
        before = self._trap()
        try:
            sock.sendall(self.data)
            while True:
                try:
                    data = sock.recv(65536)
                except InterruptedError:
                    continue
                except _Interrupted:
                    raise Gone(self.signum, self.jobs) from None
                except OSError:
                    return None
                if not data:
                    return None
                try:
                    messages = frames.feed(data)
                except ValueError:
                    return None
                for msg in messages:
                    if "refused" in msg and not self.accepted:
                        self.refused = True
                        return None
                    if msg.get("accepted"):
                        self.accepted = True
                    elif "exit" in msg:
                        return msg
                    else:
                        if isinstance(msg.get("job"), str) and msg["job"] not in self.jobs:
                            self.jobs.append(msg["job"])
                        if isinstance(msg.get("jobs"), list):
                            self.jobs.extend(j for j in msg["jobs"] if isinstance(j, str) and j not in self.jobs)
                        self.on_frame(msg)
        except _Interrupted:  # the signal came while a frame was shown
            raise Gone(self.signum, self.jobs) from None
        except OSError:
            return None
        finally:
            self._untrap(before)
            sock.close()
            self.sock = None

    def _trap(self) -> dict[int, Any]:
        before: dict[int, Any] = {}
        if not self.signals:
            return before  # a library caller's signals are its own
        for signum in FORWARDED:
            try:
                current = _signal.getsignal(signum)
                if current != _signal.SIG_IGN:  # ignored (nohup, a background job) stays so
                    before[signum] = current
                    _signal.signal(signum, self._interrupted)
            except (OSError, ValueError):
                pass
        return before

    def _untrap(self, before: dict[int, Any]) -> None:
        for signum, handler in before.items():
            try:
                _signal.signal(signum, handler)
            except (OSError, ValueError):
                pass

    def _interrupted(self, signum: int, _frame: object) -> None:
        if self.signum:
            return
        self.signum = signum
        sock = self.sock
        if sock is not None:
            try:
                sock.sendall(frame({"leave": signum}))
            except OSError:
                pass
        raise _Interrupted  # out of a blocking recv (which a handler's return would resume)


class _Interrupted(Exception):
    """A signal the caller forwards to the node (raised by its handler)."""


def _say(text: str, signals: bool) -> None:
    if signals:  # the `mam` script: its stderr is the caller's own
        try:
            if os.isatty(2):
                text = "\r\x1b[2K" + text  # a line of its own: a live line drawn there (mam.node.live) cleared
            os.write(2, text.encode())
        except OSError:
            pass


def connect(path: str) -> _socket.socket | None:
    """A connection to the node listening at `path` (a socket of this user, mode 0600), else None."""
    try:
        st = os.lstat(path)
    except OSError:
        return None
    if not (st.st_mode & 0o170000 == 0o140000 and private(st)):
        return None
    sock = _socket.socket(_socket.AF_UNIX, _socket.SOCK_STREAM | _socket.SOCK_CLOEXEC)
    fd = -1
    try:
        where, fd = address(path)
        sock.settimeout(5.0)
        sock.connect(where)
        sock.settimeout(None)
    except OSError:
        sock.close()
        return None
    finally:
        if fd >= 0:
            os.close(fd)
    return sock


def start(root: str, run_dir: str, environ: Any = None) -> _socket.socket | None:
    """Start a node for `root` in the background (unless one is starting) and connect to it."""
    path = os.path.join(run_dir, SOCKET)
    pid = 0
    until = time.monotonic() + START_WAIT_S
    while time.monotonic() < until:
        # Tried again while another holds the lock: a node starting, or one just killed, whose lock
        # the kernel releases a moment after its sockets (the client may see the end of its
        # connection first).
        pid = pid or spawn(root, run_dir, environ)
        sock = connect(path)
        if sock is not None:
            return sock
        if pid and _ended(pid):
            pid = 0
            if connect(path) is None and not _locked(run_dir):
                return None  # it ended without listening (MAM_NODE=0 in .mam.env, or it failed: see node.log)
        time.sleep(0.01)
    return None


_children: list[int] = []  # the nodes this process started: a long-lived caller reaps the ones that ended


def spawn(root: str, run_dir: str, environ: Any = None) -> int:
    """Start `mam node` for `root` detached, with the start lock taken; its pid, or 0 when one is
    starting already (the lock is held) or it could not be started."""
    import fcntl

    _children[:] = [pid for pid in _children if not _ended(pid)]
    try:
        fd = os.open(os.path.join(run_dir, LOCK), os.O_RDWR | os.O_CREAT | os.O_CLOEXEC | os.O_NOFOLLOW, 0o600)
    except OSError:
        return 0
    try:
        if not private(os.fstat(fd)):
            return 0
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            return 0  # one runs, or is starting
        os.set_inheritable(fd, True)  # the lock passes to the node with this descriptor
        log = os.path.join(run_dir, LOG)
        # Not `-m`: that puts the caller's working folder first on sys.path, for the node to import from.
        argv = [sys.executable, "-c", NODE_START, "--workspace", root, "--lock-fd", str(fd), "--autostarted"]
        actions = [
            (os.POSIX_SPAWN_OPEN, 0, os.devnull, os.O_RDONLY, 0),
            (os.POSIX_SPAWN_OPEN, 1, log, os.O_WRONLY | os.O_CREAT | os.O_APPEND | os.O_NOFOLLOW, 0o600),
            (os.POSIX_SPAWN_DUP2, 1, 2),
        ]
        try:
            pid = os.posix_spawn(
                sys.executable, argv, node_environ(None if environ is None else dict(environ)),
                file_actions=actions, setsid=True,
            )  # fmt: skip
        except OSError:
            return 0
        _children.append(pid)
        return pid
    finally:
        os.close(fd)


def node_environ(environ: dict[str, str] | None = None) -> dict[str, str]:
    """The environment a node starts with: the caller's without what changes which code a process
    loads (LD_*, PYTHON*: a node serves every later caller) or where it writes its bytecode, and with
    a PATH of absolute folders only (a relative or empty entry would find programs in whatever folder
    the node works in: a `tmux` the first caller's folder held would run for every later caller)."""
    environ = dict(os.environ) if environ is None else environ
    kept = {k: v for k, v in environ.items() if not k.startswith(("LD_", "PYTHON", "GCONV_PATH"))}
    if "PATH" in kept:
        kept["PATH"] = os.pathsep.join(p for p in kept["PATH"].split(os.pathsep) if os.path.isabs(p))
    return kept


def _ended(pid: int) -> bool:
    try:
        done, _status = os.waitpid(pid, os.WNOHANG)
    except ChildProcessError:
        return True
    return done == pid


def _locked(run_dir: str) -> bool:
    """True while a node holds the start lock (starting, or running)."""
    import fcntl

    try:
        fd = os.open(os.path.join(run_dir, LOCK), os.O_RDONLY | os.O_CLOEXEC | os.O_NOFOLLOW)
    except OSError:
        return False
    try:
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
    except OSError:
        return True
    finally:
        os.close(fd)
    return False


def ask(path: str, op: str, timeout: float = 5.0, **args: Any) -> dict[str, Any] | None:
    """One of the node's own operations (mam.protocol.CONTROL: `status`, `stop`, `web`...) to the node listening
    at `path`: its answer, `{"refused": line, "exit_code": n}` for an error, or None when none answers."""
    from mam.protocol import request

    sock = connect(path)
    if sock is None:
        return None
    try:
        sock.settimeout(timeout)
        sock.sendall(frame(request(op, args)))
        frames = Frames()
        while True:
            data = sock.recv(65536)
            if not data:
                return None
            for msg in frames.feed(data):
                if "answer" in msg and isinstance(msg["answer"], dict):
                    return msg["answer"]
                if "exit" in msg:
                    return {"refused": str(msg.get("error") or msg), "exit_code": msg["exit"]}
    except (OSError, ValueError):
        return None
    finally:
        sock.close()


def stop(path: str, wait_s: float = STOP_WAIT_S) -> tuple[dict[str, Any] | None, bool]:
    """Ask the node listening at `path` to stop and wait up to `wait_s` until it is gone: it no longer answers and
    its process has ended, so what it held (its webhook port, its monitor, its tmux control clients, the lock a
    next node takes) is free. (its answer, whether it is gone); (None, True) when none answered."""
    from mam.util.poll import Timeout, wait_for
    from mam.util.proc import pid_alive

    answer = ask(path, "stop")
    if answer is None:
        return None, True
    pid = answer.get("pid")
    own = pid == os.getpid()  # a node run in this very process (`mam node` in the foreground) ends when it returns

    def gone() -> bool:
        sock = connect(path)
        if sock is not None:
            sock.close()
            return False
        return own or not isinstance(pid, int) or not pid_alive(pid)

    try:
        wait_for(gone, timeout=wait_s, interval=0.05)
    except Timeout:
        return answer, False
    return answer, True
