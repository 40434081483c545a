"""The forkserver itself (see mam/forkserver/__init__.py): `python -m mam.forkserver.server
--workspace ROOT --lock-fd N`, started by mam.forkserver.client with the lock already taken.

It imports what a delegation needs, freezes the heap (so children share its pages), listens on
`.mam/run/forkserver.sock` and forks one child per accepted request. It holds no thread, no
connection and no open registry when it forks. The child becomes the caller's `mam` process (see
`_become`); the server keeps its end of the connection only to report a child that died of a
signal. It exits after MAM_FORKSERVER_IDLE_S seconds without a running child, at once when its
socket is replaced or removed or the workspace's tmux server ends, when mam's code on disk
changes (before it would serve stale code), and on SIGTERM.
"""

from __future__ import annotations

import argparse
import errno
import gc
import importlib
import os
import signal
import socket
import struct
import sys
import threading
import time
import traceback
from pathlib import Path
from typing import Any

from mam.forkserver.client import FORWARDED, SOCKET, Frames, frame, identity
from mam.jobs.outcomes import Exit
from mam.util.fdwait import readable
from mam.util.private import address

PRELOAD = (
    "mam.cli",
    "mam.cli.job",
    "mam.jobs.delegate",
    "mam.jobs.attempt",
    "mam.jobs.delivery",
    "mam.jobs.heartbeat",
    "mam.bus.mqtt",
    "paho.mqtt.client",
    "mam.bus.connect",
    "mam.panes.tmux",
    "mam.agents",
    "mam.demo.adapter",
    "mam.demo.agent",
    "mam.governor.gate",
    "mam.usage",
    "mam.remote.origin",
)
READ_TIMEOUT_S = 10.0  # for a request's bytes once connected, in all (the client sends them at once)
MAX_PENDING = 64  # connections whose request is still arriving; past it the oldest is dropped
LOAD_SLACK_NS = 1_000_000_000  # file times may lag the clock (coarse or whole-second timestamps)
CHECK_S = 60.0  # a look at the socket file while idle: the workspace may have been removed


def log(message: str) -> None:
    sys.stderr.write(f"{time.strftime('%Y-%m-%d %H:%M:%S')} forkserver[{os.getpid()}] {message}\n")
    sys.stderr.flush()


def _stamp() -> dict[str, tuple[int, int]]:
    """(mtime, size) of every source file loaded: a change means this process would run stale code."""
    out = {}
    for module in list(sys.modules.values()):
        path = getattr(module, "__file__", None)
        if not path:
            continue
        try:
            st = os.stat(path)
        except OSError:
            continue
        out[path] = (st.st_mtime_ns, st.st_size)
    return out


def _changed(stamp: dict[str, tuple[int, int]]) -> str:
    for path, was in stamp.items():
        try:
            st = os.stat(path)
        except OSError:
            return path
        if (st.st_mtime_ns, st.st_size) != was:
            return path
    return ""


def _tmux_pid(root: Path) -> int:
    """The pid of the workspace's tmux server (0: none runs, or another backend)."""
    try:
        from mam.panes import default_server
        from mam.panes.tmux import TmuxBackend
        from mam.settings import load_settings
        from mam.workspace import Workspace

        ws = Workspace(root)
        settings = load_settings(env_file=ws.env_file)
        return TmuxBackend(default_server("tmux", settings, ws), settings=settings, ws=ws).server_pid()
    except Exception as e:  # no tmux server to watch: the idle timer alone ends the forkserver
        log(f"no tmux server to watch: {e}")
        return 0


class Pending:
    """A connection whose request is still arriving. It is read as its bytes come, beside every other
    one (a slow caller stalls nobody), until READ_TIMEOUT_S after it was accepted; the descriptors it
    passed are the server's to close however it ends."""

    def __init__(self, conn: socket.socket) -> None:
        self.conn, self.frames = conn, Frames()
        self.fds: list[int] = []
        self.deadline = time.monotonic() + READ_TIMEOUT_S

    def read(self) -> dict[str, object] | None:
        """What arrived so far: the request once whole, else None. Raises on an ended or malformed one."""
        data, fds, _flags, _addr = socket.recv_fds(self.conn, 1 << 20, 3)
        self.fds += fds
        if not data:
            raise ValueError("the request ended early")
        if len(self.fds) > 3:
            raise ValueError(f"{len(self.fds)} descriptors passed")
        got = self.frames.feed(data)  # ValueError, EOFError or TypeError on bytes that are not a frame
        return got[0] if got else None

    def close(self) -> None:
        for fd in self.fds:
            try:
                os.close(fd)
            except OSError:
                pass
        self.fds = []
        self.conn.close()


class Server:
    def __init__(self, root: Path, lock_fd: int, idle_s: float) -> None:
        self.root, self.lock_fd, self.idle_s = root, lock_fd, idle_s
        self.run_dir = root / ".mam" / "run"
        self.path = str(self.run_dir / SOCKET)
        self.children: dict[int, socket.socket] = {}
        self.pending: dict[int, Pending] = {}  # by descriptor
        self.me = identity()
        self.stamp: dict[str, tuple[int, int]] = {}
        self.ending = ""
        self.private_fds: list[int] = []

    def bind(self) -> None:
        try:
            os.unlink(self.path)  # left by a forkserver that died: ours now, under the lock
        except FileNotFoundError:
            pass
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM | socket.SOCK_CLOEXEC)
        where, fd = address(self.path)
        old = os.umask(0o177)
        try:
            self.sock.bind(where)
        finally:
            os.umask(old)
            if fd >= 0:
                os.close(fd)
        os.chmod(self.path, 0o600)
        self.inode = os.stat(self.path).st_ino
        self.sock.listen(128)
        self.sock.setblocking(False)

    def serve(self) -> str:
        wake_r, wake_w = os.pipe2(os.O_NONBLOCK | os.O_CLOEXEC)
        self.private_fds += [wake_r, wake_w]
        signal.set_wakeup_fd(wake_w)
        signal.signal(signal.SIGCHLD, lambda *_: None)
        signal.signal(signal.SIGTERM, lambda *_: self._end("SIGTERM"))
        tmux = _tmux_pid(self.root)
        watched = [wake_r, self.sock.fileno()]
        if tmux:
            try:
                watched.append(os.pidfd_open(tmux))
                self.private_fds.append(watched[-1])
            except OSError:
                tmux = 0
        idle_since = time.monotonic()
        while not self.ending:
            timeout = CHECK_S
            if not self.children:
                timeout = min(timeout, max(0.0, idle_since + self.idle_s - time.monotonic()))
            if self.pending:
                first = min(p.deadline for p in self.pending.values())
                timeout = min(timeout, max(0.0, first - time.monotonic()))
            ready = readable([*watched, *self.pending], timeout)
            self._reap()
            self._read_pending(ready)
            if self.pending:
                idle_since = time.monotonic()
            if self.children:
                idle_since = time.monotonic()
            if wake_r in ready:
                try:
                    while os.read(wake_r, 512):
                        pass
                except BlockingIOError:
                    pass
            if len(watched) > 2 and watched[2] in ready:
                self._end(f"the tmux server {tmux} ended")
            elif not self._socket_ours():
                self._end("its socket was removed or replaced")
            elif self.sock.fileno() in ready:
                self._accept_all()
                idle_since = time.monotonic()
            elif not self.children and time.monotonic() >= idle_since + self.idle_s:
                self._end(f"idle for {self.idle_s:g} s")
        return self.ending

    def _read_pending(self, ready: list[int]) -> None:
        """Read what came on each pending connection; serve the whole requests, drop the late or bad ones."""
        now = time.monotonic()
        for fd in [fd for fd in self.pending if fd in ready or self.pending[fd].deadline <= now]:
            pending = self.pending[fd]
            try:
                if fd not in ready:
                    raise TimeoutError(f"no whole request within {READ_TIMEOUT_S:g} s")
                request = pending.read()
            except BlockingIOError:
                continue
            except Exception as e:  # one bad request must not end the server, nor keep what it passed
                log(f"request refused: {e}")
                del self.pending[fd]
                pending.close()
                continue
            if request is None:
                continue
            del self.pending[fd]
            fds, pending.fds = pending.fds, []
            try:
                pending.conn.setblocking(True)
                self._take(pending.conn, request, fds)
            except Exception as e:
                log(f"request refused: {e}")
                pending.conn.close()
            finally:
                for passed in fds:
                    try:
                        os.close(passed)
                    except OSError:
                        pass

    def drain(self) -> None:
        """After the end: wait for the children still running, to report the ones killed by a signal."""
        while self.children:
            try:
                pid, status = os.waitpid(-1, 0)
            except ChildProcessError:
                return
            conn = self.children.pop(pid, None)
            if conn is not None:
                self._report(conn, status)

    def _end(self, why: str) -> None:
        self.ending = self.ending or why

    def _socket_ours(self) -> bool:
        try:
            return os.stat(self.path).st_ino == self.inode
        except OSError:
            return False

    def _reap(self) -> None:
        while self.children:
            try:
                pid, status = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                return
            if pid == 0:
                return
            conn = self.children.pop(pid, None)
            if conn is not None:
                self._report(conn, status)

    @staticmethod
    def _report(conn: socket.socket, status: int) -> None:
        if os.WIFSIGNALED(status):  # it could not say so itself
            try:
                conn.sendall(frame({"signal": os.WTERMSIG(status)}))
            except OSError:
                pass
        conn.close()

    def _accept_all(self) -> None:
        while not self.ending:
            try:
                conn, _addr = self.sock.accept()
            except (BlockingIOError, InterruptedError):
                return
            except OSError as e:
                log(f"accept: {e}")
                return
            try:
                _pid, uid, _gid = struct.unpack("3i", conn.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, 12))
            except OSError as e:
                log(f"accept: {e}")
                conn.close()
                continue
            if uid != os.geteuid():
                log(f"refused a peer of uid {uid}")
                conn.close()
                continue
            conn.setblocking(False)
            if len(self.pending) >= MAX_PENDING:  # the oldest goes: descriptors are finite
                oldest = min(self.pending, key=lambda fd: self.pending[fd].deadline)
                log("request refused: too many requests arriving at once")
                self.pending.pop(oldest).close()
            self.pending[conn.fileno()] = Pending(conn)

    def _take(self, conn: socket.socket, request: dict[str, object], fds: list[int]) -> None:
        """Serve a whole request: fork its child, or say why not. The caller closes `fds` after."""
        why = self._refusal(request, fds)
        if why:
            conn.sendall(frame({"refused": why}))
            conn.close()
            return
        pid = os.fork()
        if pid == 0:
            try:
                self._drop_all()
                _become(conn, request, fds)  # ends the process
            finally:
                os._exit(Exit.FAILED)  # whatever escaped it: never back into the server's loop
        self.children[pid] = conn

    def _drop_all(self) -> None:
        """In a new child: close what only the server may hold (the lock, its socket, the others' callers)."""
        self.sock.close()
        for other in self.children.values():
            other.close()
        for waiting in self.pending.values():  # requests still arriving: their caller is not this child's
            waiting.close()
        for fd in (self.lock_fd, *self.private_fds):
            try:
                os.close(fd)
            except OSError:
                pass

    def _refusal(self, request: dict[str, object], fds: list[int]) -> str:
        if len(fds) != 3 or not isinstance(request.get("argv"), list) or not isinstance(request.get("env"), dict):
            return "a malformed request"
        mismatch = [k for k, v in self.me.items() if request.get(k) != v]
        if mismatch:
            return f"another {', '.join(mismatch)}"
        changed = _changed(self.stamp)
        if changed:
            self._end(f"{changed} changed on disk")
            return "mam's code changed on disk"
        return ""


def _become(conn: socket.socket, request: dict[str, object], fds: list[int]) -> None:
    """The child: take on the caller's process state, run `mam <argv>`, report its exit code, end."""
    code: int = Exit.FAILED
    try:
        signal.set_wakeup_fd(-1)
        _signals(request)
        for target, fd in enumerate(fds):
            os.dup2(fd, target)
        for fd in fds:
            os.close(fd)
        env = request["env"]
        assert isinstance(env, dict)
        os.environ.clear()
        os.environ.update({str(k): str(v) for k, v in env.items()})
        os.chdir(str(request["cwd"]))
        os.umask(int(request["umask"]))  # type: ignore[call-overload]
        time.tzset()  # TZ, as a fresh interpreter reads it
        try:
            import locale

            locale.setlocale(locale.LC_CTYPE, "")  # as the interpreter does at its start
        except (ImportError, locale.Error):
            pass
        _streams(request.get("streams"))
        argv = [str(a) for a in request["argv"]]  # type: ignore[attr-defined]
        sys.argv = argv
        conn.sendall(frame({"pid": os.getpid()}))
        threading.Thread(target=_watch_caller, args=(conn,), name="mam-caller", daemon=True).start()
        code = _run(argv[1:])
    except BaseException:  # the child must never return into the server's loop
        traceback.print_exc()
    signal.pthread_sigmask(signal.SIG_BLOCK, FORWARDED)  # a late ^C must not stop the report
    try:
        conn.sendall(frame({"exit": code}))
    except OSError:
        pass
    os._exit(code)


def _signals(request: dict[str, object]) -> None:
    """The caller's dispositions of the signals it forwards (ignored stays ignored: nohup, a background
    job), Python's defaults for the rest, and the caller's blocked set."""
    ignored = request.get("ignored")
    ignored = set(ignored) if isinstance(ignored, list) else set()
    for signum in (signal.SIGCHLD, signal.SIGTERM, signal.SIGHUP, signal.SIGINT):
        if signum in ignored:
            signal.signal(signum, signal.SIG_IGN)
        elif signum == signal.SIGINT:
            signal.signal(signum, signal.default_int_handler)
        else:
            signal.signal(signum, signal.SIG_DFL)
    blocked = request.get("blocked")
    if isinstance(blocked, list):
        signal.pthread_sigmask(signal.SIG_SETMASK, [int(n) for n in blocked])


def _run(args: list[str]) -> int:
    import atexit

    from mam.cli import main  # not mam.entry's main: that would hand the command to a forkserver again

    code: object = Exit.OK
    try:
        main(args)
    except SystemExit as e:
        code = e.code
    atexit._run_exitfuncs()
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):
            pass
    if code is None:
        return Exit.OK
    if isinstance(code, int):
        return code & 0xFF
    sys.stderr.write(f"{code}\n")  # as the interpreter does for sys.exit("message")
    sys.stderr.flush()
    return Exit.FAILED


def _streams(spec: object) -> None:
    """New sys.stdin/stdout/stderr on descriptors 0-2 (now the caller's), with the caller's encodings,
    buffered as the interpreter buffers them."""
    import io

    given = spec if isinstance(spec, list) and len(spec) == 3 else [("utf-8", "strict")] * 3
    unbuffered = bool(os.environ.get("PYTHONUNBUFFERED"))  # the caller's environment by now
    made = []
    for fd, (encoding, errors) in enumerate(given):
        tty = os.isatty(fd)
        raw = io.FileIO(fd, "r" if fd == 0 else "w", closefd=False)
        if fd == 0:
            buffered: Any = io.BufferedReader(raw)
        else:  # as `python -u` (PYTHONUNBUFFERED) has them: the raw file, written through
            buffered = raw if unbuffered else io.BufferedWriter(raw)
        made.append(
            io.TextIOWrapper(
                buffered,
                encoding=str(encoding),
                errors="backslashreplace" if fd == 2 else str(errors),
                newline="\n",  # as the interpreter opens its standard streams on POSIX: no translation
                line_buffering=tty or fd == 2,
                write_through=unbuffered and fd > 0,
            )
        )
    sys.stdin, sys.stdout, sys.stderr = made


def _watch_caller(conn: socket.socket) -> None:
    """Forward the caller's signals to this child; if the caller dies, die as it did (SIGKILL)."""
    frames = Frames()
    while True:
        try:
            data = conn.recv(4096)
        except InterruptedError:
            continue
        except OSError:
            data = b""
        if not data:
            os.kill(os.getpid(), signal.SIGKILL)
            return
        for msg in frames.feed(data):
            signum = msg.get("kill")
            if isinstance(signum, int) and signum in FORWARDED:
                os.kill(os.getpid(), signum)


def _preload() -> None:
    for name in PRELOAD:
        try:
            importlib.import_module(name)
        except Exception as e:  # a child imports it again and reports the error where it belongs
            log(f"preload {name}: {e}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m mam.forkserver.server")
    parser.add_argument("--workspace", required=True)
    parser.add_argument("--lock-fd", type=int, required=True)
    args = parser.parse_args(argv)
    os.closerange(3, args.lock_fd)  # nothing of the caller's but the lock
    os.closerange(args.lock_fd + 1, 1 << 16)
    root = Path(args.workspace)
    os.chdir("/")  # hold no caller's folder (each child goes to its own caller's)
    try:
        os.ftruncate(args.lock_fd, 0)
        os.pwrite(args.lock_fd, f"{os.getpid()}\n".encode(), 0)
        from mam.settings import load_settings
        from mam.workspace import Workspace

        settings = load_settings(env_file=Workspace(root).env_file)
        if not settings.forkserver:
            return Exit.OK
        loading = time.time_ns() - LOAD_SLACK_NS
        _preload()
        server = Server(root, args.lock_fd, settings.forkserver_idle_s)
        # Stamped before the socket appears: a change after it is seen by the next request. A file
        # written while we loaded it may be loaded old and stamped new, so such a file ends us here.
        server.stamp = _stamp()
        fresh = [path for path, (mtime, _size) in server.stamp.items() if mtime >= loading]
        if fresh:
            log(f"not started: {fresh[0]} changed while it was loaded")
            return Exit.OK
        server.bind()
    except Exception as e:
        log(f"not started: {e}")
        return Exit.FAILED
    gc.collect()
    gc.freeze()  # the children then share these pages instead of copying each one the collector touches
    log(f"serving {root} (pid {os.getpid()})")
    try:
        why = server.serve()
    finally:
        if server._socket_ours():
            try:
                os.unlink(server.path)
            except OSError as e:
                if e.errno != errno.ENOENT:
                    raise
        server.sock.close()
        os.close(args.lock_fd)  # a new forkserver may start while the children here finish
    log(f"exiting: {why}")
    server.drain()
    return Exit.OK


if __name__ == "__main__":
    sys.exit(main())
