"""The node process (see mam/node/__init__.py): `mam node`, or started in the background by the thin
client as `python -c NODE_START --workspace ROOT --lock-fd N --autostarted`.

It holds `.mam/run/node.lock` (flock) for its whole life, listens on `.mam/run/node.sock` (0600;
peers checked by uid) and writes `.mam/run/node.json` (pid, started, name, socket). Each connection
gets a thread that reads its request within READ_TIMEOUT_S (a slow caller stalls only itself) and
closes every descriptor it received however the request ends. A request runs as the ordinary click
command (mam.cli) inside `caller.serving(...)`, its output on the caller's own descriptors.

Beside the requests: the monitor's reconciliation (mam.monitor.main.Monitor, in a thread), the
routines (mam.routines.node, in a thread), with `--name NAME` the remote runner
(mam.remote.runner.Runner; its fleet table answers op `fleet`), and once `mam web` asks (op `web`)
the web page (mam.web.serve.Hosted, in a thread) until `mam web --stop` (op `web-stop`). An
autostarted node ends once no request is in flight, no job of the workspace is open, no routine is
enabled, it serves no page and the workspace's tmux server is not running (so `mam demo` leaves
nothing behind), or once its socket file is gone or replaced, or mam's code on disk changed (when
idle: a stale node never serves new callers); `mam node stop` and SIGTERM end any node.
Open jobs stay open when a node ends; the next node's monitor (or a `mam job wait`) takes them over,
and the heartbeats it ran as threads go on in heartbeater processes (mam.jobs.heartbeat.hand_over).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import logging
import os
import signal
import socket
import struct
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from mam.jobs import heartbeat
from mam.node import streams
from mam.node.wire import LOCK, SOCKET, STATUS, Frames, frame
from mam.outcomes import Exit
from mam.settings import Settings, load_settings
from mam.store import jobs as jobs_table
from mam.store.db import keep_idle
from mam.store.registry import Registry
from mam.util import caller
from mam.util.fdwait import readable
from mam.util.private import address
from mam.workspace import Workspace

log = logging.getLogger("mam.node")

READ_TIMEOUT_S = 10.0  # for a request's bytes once connected (the client sends them at once)
CHECK_S = 2.0  # how often an idle node looks at its socket, the tmux server, the open jobs and its code
MONITOR_RESTART_S = 30.0  # a monitor that could not run (another holds its lock) is tried again after this


class Request:
    """One caller's command running in this node: its streams, the job it drives, whether it left."""

    def __init__(self, conn: socket.socket, fds: list[int], msg: dict[str, Any]) -> None:
        self.conn = conn
        self.stdin = streams.Stream(fds[0], "r")
        self.stdout = streams.Stream(fds[1], "w")
        self.stderr = streams.Stream(fds[2], "w")
        self.argv = [str(a) for a in msg["argv"]]
        self.who = caller.Caller(
            environ=dict(msg["env"]),
            cwd=str(msg["cwd"]),
            pid=int(msg["pid"]),
            ppid=int(msg["ppid"]),
            stdin=self.stdin,
            stdout=self.stdout,
            stderr=self.stderr,
            on_job=self.on_job,
        )
        self.job = ""
        self.gone = False
        self._lock = threading.Lock()

    def tell(self, msg: dict[str, Any]) -> None:
        with self._lock:
            if self.gone:
                return
            try:
                self.conn.sendall(frame(msg))
            except OSError:
                self.left()

    def on_job(self, job_id: str) -> None:
        self.job = job_id
        self.tell({"job": job_id})

    def left(self) -> None:
        """The caller is gone (interrupted, killed): the command runs on, its output dropped."""
        self.gone = True
        for stream in (self.stdout, self.stderr):
            stream.mute()

    def close(self) -> None:
        for stream in (self.stdin, self.stdout, self.stderr):
            stream.close()


def _check_request(msg: dict[str, Any]) -> str:
    """'' if `msg` is a well-formed command request, else what is wrong with it."""
    argv, env = msg.get("argv"), msg.get("env")
    if not isinstance(argv, list) or not argv or not all(isinstance(a, str) for a in argv):
        return "argv: a list of strings"
    if not isinstance(env, dict) or not all(isinstance(k, str) and isinstance(v, str) for k, v in env.items()):
        return "env: an object of strings"
    if not isinstance(msg.get("cwd"), str) or not os.path.isabs(msg["cwd"]):
        return "cwd: an absolute path"
    if not all(isinstance(msg.get(k), int) and not isinstance(msg.get(k), bool) for k in ("pid", "ppid")):
        return "pid, ppid: integers"
    return ""


class Node:
    def __init__(
        self,
        ws: Workspace,
        settings: Settings,
        *,
        name: str = "",
        autostarted: bool = False,
        fleet: Callable[[], list[dict[str, Any]]] | None = None,
    ) -> None:
        self.ws = ws
        self.fleet = fleet  # with --name: the runner's fleet table (op `fleet`), as `mam status --fleet --json` rows
        self.settings = settings
        self.name = name
        self.autostarted = autostarted
        self.path = ws.run_dir / SOCKET
        self.status_path = ws.run_dir / STATUS
        self.started = time.time()
        self.requests: set[Request] = set()
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._why = ""
        self._ident: tuple[int, int] | None = None  # the socket file's (device, inode) while it is ours
        self._code = CodeWatch()
        self.monitor: Any = None
        self.web: Any = None  # mam.web.serve.Hosted while this node serves the page (`mam web`)
        self._web_lock = threading.Lock()

    # -- life ---------------------------------------------------------------------------------

    def serve(self, beside: Callable[[], int] | None = None) -> int:
        """Serve until stopped. `beside`: a runner's `run` (mam.remote.runner), run in this thread while
        the requests are served in another; the node ends with it, and its errors are the command's."""
        streams.install()
        keep_idle()  # this process opens the registry several times per job: its connections are kept
        listener = self._listen()
        self._write_status()
        threading.Thread(target=self._monitor, name="mam-node-monitor", daemon=True).start()
        threading.Thread(target=self._routines, name="mam-node-routines", daemon=True).start()
        log.info("serving workspace %s on %s (pid %d)", self.ws.root, self.path, os.getpid())
        try:
            if beside is None:
                self._accept(listener)
                return Exit.OK
            threading.Thread(target=self._accept, args=(listener,), name="mam-node-accept", daemon=True).start()
            try:
                return beside()
            finally:
                self.stop(f"the runner {self.name} ended")
        finally:
            self._stop_web()
            listener.close()
            self._remove_files()
            if self.monitor is not None:
                self.monitor.stop()
            heartbeat.hand_over()  # the jobs it beats for go on beating in processes of their own
            log.info("ended: %s", self._why or "stopped")

    def _accept(self, listener: socket.socket) -> None:
        last_check = time.monotonic()
        while not self._stop.is_set():
            if readable([listener.fileno()], CHECK_S):
                with contextlib.suppress(OSError):
                    conn, _ = listener.accept()
                    threading.Thread(target=self._connection, args=(conn,), name="mam-node-conn", daemon=True).start()
            if time.monotonic() - last_check >= CHECK_S:
                last_check = time.monotonic()
                why = self._should_end()
                if why:
                    self.stop(why)

    def stop(self, why: str = "stopped") -> None:
        self._why = self._why or why
        self._stop.set()

    def _listen(self) -> socket.socket:
        with contextlib.suppress(FileNotFoundError):
            self.path.unlink()  # the lock is ours: whatever socket is there is a dead node's
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM | socket.SOCK_CLOEXEC)
        where, fd = address(str(self.path))
        old = os.umask(0o177)
        try:
            sock.bind(where)
        finally:
            os.umask(old)
            if fd >= 0:
                os.close(fd)
        os.chmod(self.path, 0o600)
        st = os.lstat(self.path)
        self._ident = (st.st_dev, st.st_ino)
        sock.listen(64)
        return sock

    def _write_status(self) -> None:
        status = {
            "pid": os.getpid(),
            "started": self.started,
            "name": self.name,
            "socket": str(self.path),
            "autostarted": self.autostarted,
        }
        tmp = self.status_path.with_name(f".{STATUS}.{os.getpid()}")
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, 0o600)
        with os.fdopen(fd, "w") as f:
            f.write(json.dumps(status) + "\n")
        os.replace(tmp, self.status_path)

    def _remove_files(self) -> None:
        if self._owns_socket():
            with contextlib.suppress(OSError):
                self.path.unlink()
            with contextlib.suppress(OSError):
                if json.loads(self.status_path.read_text()).get("pid") == os.getpid():
                    self.status_path.unlink()

    def _owns_socket(self) -> bool:
        try:
            st = os.lstat(self.path)
        except OSError:
            return False
        return (st.st_dev, st.st_ino) == self._ident

    def _should_end(self) -> str:
        if not self._owns_socket():
            return "its socket was removed or replaced"
        with self._lock:
            busy = bool(self.requests)
        if busy:
            return ""
        if self._code.changed():
            return "mam's code changed on disk"
        if self.web is not None and self.web.alive():
            return ""  # a page is served until `mam web --stop` or `mam node stop`
        if not self.autostarted or self.name:
            return ""
        if self._open_jobs():
            return ""
        from mam.routines.node import keeps_node

        if keeps_node(self.ws):  # an enabled routine fires on its own schedule (mam.routines)
            return ""
        if _tmux_running(self.ws, self.settings):
            return ""
        return "the workspace's tmux server is not running and no job is open"

    def _open_jobs(self) -> list[str]:
        registry = Registry.open_existing(self.ws)
        if registry is None:
            return []
        try:
            with registry.read() as conn:
                return [row.id for row in jobs_table.open_jobs(conn)]
        finally:
            registry.close()

    # -- requests -----------------------------------------------------------------------------

    def _connection(self, conn: socket.socket) -> None:
        fds: list[int] = []
        try:
            msg = self._read_request(conn, fds)
            if msg is None:
                return
            if "op" in msg:
                conn.sendall(frame(self._answer(msg)))
                return
            problem = _check_request(msg) or ("" if len(fds) == 3 else "three descriptors: stdin, stdout, stderr")
            if problem:
                conn.sendall(frame({"refused": f"a malformed request ({problem})"}))
                return
            request = Request(conn, fds, msg)
            fds = []  # the request's streams own them now
            self._run(request)
        except OSError as e:
            log.info("a connection ended early: %s", e)
        finally:
            for fd in fds:
                with contextlib.suppress(OSError):
                    os.close(fd)
            conn.close()

    def _read_request(self, conn: socket.socket, fds: list[int]) -> dict[str, Any] | None:
        """The first frame and the descriptors sent with it; None for a peer of another user, a
        malformed frame or one not complete within READ_TIMEOUT_S (every descriptor received is in `fds`)."""
        pid, uid, _gid = struct.unpack("3i", conn.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, 12))
        if uid != os.geteuid():
            log.warning("refused a connection from uid %d (pid %d)", uid, pid)
            return None
        frames = Frames()
        until = time.monotonic() + READ_TIMEOUT_S
        space = socket.CMSG_SPACE(3 * 4)
        while True:
            left = until - time.monotonic()
            if left <= 0:
                log.info("a request from pid %d did not arrive within %.0f s", pid, READ_TIMEOUT_S)
                return None
            conn.settimeout(left)
            try:
                data, ancdata, _flags, _addr = conn.recvmsg(65536, space, socket.MSG_CMSG_CLOEXEC)
            except TimeoutError:
                continue
            for level, kind, payload in ancdata:
                if level == socket.SOL_SOCKET and kind == socket.SCM_RIGHTS:
                    usable = len(payload) - len(payload) % 4
                    fds.extend(struct.unpack(f"{usable // 4}i", payload[:usable]))
            if not data:
                return None
            try:
                got = frames.feed(data)
            except ValueError as e:
                log.info("a malformed request from pid %d: %s", pid, e)
                return None
            if got:
                conn.settimeout(None)
                return got[0]

    def _answer(self, msg: dict[str, Any]) -> dict[str, Any]:
        op = str(msg["op"])
        if op == "web":
            return self._serve_web(msg)
        if op == "web-stop":
            return {"stopped": self._stop_web()}
        if op == "status":
            return self.status()
        if op == "fleet":  # null without a runner: the asker listens to the broker itself
            return {"fleet": self.fleet() if self.fleet is not None else None, "name": self.name}
        if op == "stop":
            self.stop("asked to stop (mam node stop)")
            return {"stopping": True, "pid": os.getpid()}
        return {"refused": f"unknown op {op!r}"}

    def status(self) -> dict[str, Any]:
        with self._lock:
            running = [{"argv": r.argv[:3], "job": r.job, "pid": r.who.pid} for r in self.requests]
        return {
            "pid": os.getpid(),
            "started": self.started,
            "name": self.name,
            "socket": str(self.path),
            "autostarted": self.autostarted,
            "open_jobs": self._open_jobs(),
            "requests": running,
            "broker": self._broker(),
            "web": self.web.status() if self.web is not None and self.web.alive() else None,
        }

    def _serve_web(self, msg: dict[str, Any]) -> dict[str, Any]:
        """Serve the page as `mam web` asks (host, port, token, token_source, tls_cert, tls_key), or
        answer with the one served already when it is the same; `refused` (and an exit code) if not."""
        from dataclasses import asdict

        from mam.errors import MamError
        from mam.web.serve import Hosted

        fields = {k: msg.get(k) for k in ("host", "port", "token", "token_source", "tls_cert", "tls_key")}
        strings = all(isinstance(fields[k], str) for k in ("host", "token", "token_source"))
        paths = all(fields[k] is None or isinstance(fields[k], str) for k in ("tls_cert", "tls_key"))
        if not (isinstance(fields["port"], int) and strings and paths):
            return {"refused": "a malformed web request", "exit_code": int(Exit.USAGE)}
        with self._web_lock:
            if self.web is not None and self.web.alive():
                if not self.web.same(**{k: fields[k] for k in ("host", "port", "token", "tls_cert", "tls_key")}):
                    return {
                        "refused": f"this node serves the page at {self.web.served().url} already, with other "
                        "options or another token: stop it first (mam web --stop)",
                        "exit_code": int(Exit.USAGE),
                    }
                return {**asdict(self.web.served()), "pid": os.getpid()}
            try:
                hosted = Hosted(
                    self.ws,
                    self.settings,
                    host=str(fields["host"]),
                    port=int(fields["port"]),
                    token=str(fields["token"]),
                    token_source=str(fields["token_source"]),
                    tls_cert=fields["tls_cert"],
                    tls_key=fields["tls_key"],
                )
                served = hosted.start()
            except MamError as e:
                return {"refused": str(e), "exit_code": int(e.exit_code)}
            self.web = hosted
            return {**asdict(served), "pid": os.getpid()}

    def _stop_web(self) -> str:
        """Stop serving the page; the address it was served at ('' if none was)."""
        with self._web_lock:
            hosted, self.web = self.web, None
        if hosted is None:
            return ""
        hosted.stop()
        log.info("stopped serving the page at %s", hosted.served().url)
        return str(hosted.served().url)

    def _broker(self) -> dict[str, Any]:
        from mam.broker.survey import listing

        try:
            return listing(self.settings, self.ws, connect=False)
        except Exception as e:  # a status never fails for the broker's sake
            return {"error": str(e)}

    def _run(self, request: Request) -> None:
        if not self._enabled(request):
            request.tell({"refused": "MAM_NODE=0: run in the caller's process"})
            return
        with self._lock:
            self.requests.add(request)
        watcher = threading.Thread(target=self._watch_caller, args=(request,), name="mam-node-caller", daemon=True)
        try:
            request.tell({"accepted": True})
            watcher.start()
            code = _run_cli(request)
            with contextlib.suppress(OSError, ValueError):
                request.stdout.flush()
                request.stderr.flush()
            request.tell({"exit": code})
            request.left()
            if request.job and request.job in self._open_jobs():
                # `--detach` returned at delivery (or a wait gave up): the node drives the job to its end.
                request.argv = ["--workspace", str(self.ws.root), "job", "wait", request.job]
                _run_cli(request)
        finally:
            with self._lock:
                self.requests.discard(request)
            request.close()

    def _enabled(self, request: Request) -> bool:
        """MAM_NODE=0 from the caller's environment or the workspace's `.mam.env`: run in the caller."""
        try:
            settings = load_settings(env_file=self.ws.env_file, environ=request.who.environ)
        except Exception:
            return True  # the command itself reports bad settings, in the node as it would anywhere
        return bool(settings.node)

    def _watch_caller(self, request: Request) -> None:
        """Read what the caller sends while its command runs: an interrupt, or its end (EOF)."""
        frames = Frames()
        while True:
            try:
                data = request.conn.recv(4096)
            except OSError:
                data = b""
            if not data:
                request.left()
                return
            try:
                messages = frames.feed(data)
            except ValueError:
                request.left()
                return
            for msg in messages:
                if "signal" in msg:
                    log.info(
                        "caller %d interrupted (signal %s); job %s runs on",
                        request.who.pid,
                        msg["signal"],
                        request.job or "-",
                    )
                    request.left()

    # -- beside the requests --------------------------------------------------------------------

    def _monitor(self) -> None:
        from mam.errors import LockBusy
        from mam.monitor.main import Monitor

        while not self._stop.is_set():
            # Its own lock: a `mam monitor` beside it runs as well (reconciling twice is safe: every
            # repair is a compare-and-set in the store); two nodes never run (the node's own lock).
            self.monitor = Monitor(self.ws, self.settings, name="node-monitor")
            try:
                self.monitor.run()
                return
            except LockBusy:
                pass  # a node that was stopped still lets go of it: look again later
            except Exception:
                log.exception("the monitor failed; restarting it in %.0f s", MONITOR_RESTART_S)
            self._stop.wait(MONITOR_RESTART_S)

    def _routines(self) -> None:
        from mam.routines.node import serve

        serve(self.ws, self.settings, self._stop)


def _run_cli(request: Request) -> int:
    from mam.node.call import run_as

    return run_as(
        request.who, request.argv, failed="mam: error: the command failed in the node; see .mam/run/node.log\n"
    )


def _tmux_running(ws: Workspace, settings: Settings) -> bool:
    """The workspace's default tmux server, or the server of any session at the socket its row recorded
    (made by callers of other TMUX_TMPDIR than this node's), runs."""
    from mam.panes import default_server
    from mam.panes.tmux import TmuxBackend

    try:
        servers = {(default_server("tmux", settings, ws), "")}
        registry = Registry.open_existing(ws)
        if registry is not None:
            try:
                servers |= {(r.server, r.socket) for r in registry.sessions() if r.backend == "tmux" and r.socket}
            finally:
                registry.close()
        return any(
            TmuxBackend(name, settings=settings, ws=ws, socket=path).server_pid() for name, path in sorted(servers)
        )
    except Exception:
        return False


class CodeWatch:
    """Whether a mam module this node loaded changed on disk since (it would serve stale code)."""

    def __init__(self) -> None:
        self.seen: dict[str, tuple[int, int]] = {}
        self.changed()

    def changed(self) -> bool:
        for module in list(sys.modules.values()):
            path = getattr(module, "__file__", None) or ""
            if not (getattr(module, "__name__", "").startswith("mam") and path):
                continue
            try:
                st = os.stat(path)
            except OSError:
                return True
            stamp = (st.st_mtime_ns, st.st_size)
            if self.seen.setdefault(path, stamp) != stamp:
                return True
        return False


@contextlib.contextmanager
def _lock_held(ws: Workspace, lock_fd: int | None) -> Iterator[bool]:
    """The node's start lock: the descriptor the client passed (taken already), else taken here."""
    import fcntl

    fd = lock_fd
    if fd is None:
        fd = os.open(ws.run_dir / LOCK, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC | os.O_NOFOLLOW, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            os.close(fd)
            yield False
            return
    os.set_inheritable(fd, False)
    try:
        yield True
    finally:
        os.close(fd)


def run_node(
    ws: Workspace,
    settings: Settings,
    *,
    name: str = "",
    autostarted: bool = False,
    lock_fd: int | None = None,
    beside: Callable[[], int] | None = None,
    on_stop: Callable[[], None] | None = None,
    fleet: Callable[[], list[dict[str, Any]]] | None = None,
) -> int:
    """Be the workspace's node until stopped (SIGTERM, `mam node stop`); Exit.LOCK_BUSY when another
    node holds the lock. `beside`/`on_stop`/`fleet`: a runner's run, stop and fleet table (`mam node --name`)."""
    ws.ensure_state()
    with _lock_held(ws, lock_fd) as mine:
        if not mine:
            return Exit.LOCK_BUSY
        if autostarted and (not settings.node or settings.no_autostart):
            log.info("not started: MAM_NODE=0 or MAM_NO_AUTOSTART=1 in %s", ws.env_file)
            return Exit.OK
        node = Node(ws, settings, name=name, autostarted=autostarted, fleet=fleet)

        def stop(*_: object) -> None:
            node.stop("SIGTERM")
            if on_stop is not None:
                on_stop()

        previous = signal.signal(signal.SIGTERM, stop)
        try:
            return node.serve(beside)
        finally:
            signal.signal(signal.SIGTERM, previous)


def main(argv: list[str] | None = None) -> int:
    """The autostarted node: `--workspace ROOT --lock-fd N --autostarted` (mam.node.client.spawn)."""
    code = serve_node(argv)
    logging.shutdown()
    os._exit(code)  # not the interpreter's own exit: it could wait forever on a lock a daemon thread held


def serve_node(argv: list[str] | None = None) -> int:
    """`main` up to its exit code (bench/node_profile.py profiles it, then writes its profile)."""
    parser = argparse.ArgumentParser(prog="mam-node")
    parser.add_argument("--workspace", required=True)
    parser.add_argument("--lock-fd", type=int, default=None)
    parser.add_argument("--autostarted", action="store_true")
    args = parser.parse_args(argv)
    os.chdir(args.workspace)  # the workspace's folder, not the first caller's: it serves every caller
    logging.basicConfig(level=logging.INFO, format="%(asctime)s node[%(process)d] %(message)s")
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # a detached node: only SIGTERM or `mam node stop` end it
    signal.signal(signal.SIGHUP, signal.SIG_IGN)
    ws = Workspace(Path(args.workspace))
    settings = load_settings(env_file=ws.env_file, environ=os.environ)
    return run_node(ws, settings, autostarted=args.autostarted, lock_fd=args.lock_fd)
