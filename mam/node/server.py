"""The node process (see mam/node/__init__.py): `mam node`, or started in the background by the thin
client as `python -c NODE_START --workspace ROOT --lock-fd N --autostarted`.

It holds `.mam/run/node.lock` (flock) for its whole life, listens on `.mam/run/node.sock` (0600;
peers checked by uid) and writes `.mam/run/node.json` (pid, started, name, socket). Each connection
gets a thread that reads its request within READ_TIMEOUT_S (a slow caller stalls only itself): one
frame of the node protocol (mam.protocol), checked, then run by the Service (mam.node.service) in
that thread, its frames sent back as it goes; the connection's end (EOF, or a `leave` frame) only
means the client has gone: the operation runs on. No descriptor, environment or folder of the
caller's is taken: what a request may vary is in its fields.

Beside the requests: the monitor's reconciliation (mam.monitor.main.Monitor, in a thread), the
routines (mam.routines.node, in a thread), the org's scheduler that wakes tasks (mam.org.node, in a
thread), the board's retained messages (mam.board.keeper), the activity of the agent CLIs that call no
hook of mam's, read from their own stores (mam.hooks.store_watch, in a thread), with `--name NAME` the remote runner
(mam.remote.runner.Runner; its fleet table answers op `fleet`), and once `mam web` asks (op `web`)
the web page (mam.web.serve.Hosted, in a thread) until `mam web --stop` (op `web_stop`;
`web_logout` ends its logins). An autostarted node ends once no request is in flight, no job of
the workspace is open, no routine is enabled, no task waits for the node to wake it, it serves no
page and the workspace's tmux server is not running (so `mam demo` leaves nothing behind), or once
its socket file is gone or replaced, or mam's code on disk changed (when idle: a stale node never
serves new callers); `mam node stop` and SIGTERM end any node. A node that ends with nothing left
(no open job, no enabled routine, no task to wake, no tmux server) stops the workspace's embedded
broker too when a command started it on demand (never one started with `mam broker start`).
Open jobs stay open when a node ends; the next node's monitor (or a `mam job wait`) takes them over,
and the heartbeats it ran as threads go on in heartbeater processes (mam.jobs.heartbeat.hand_over).
"""

from __future__ import annotations

import argparse
import contextlib
import fcntl
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
from dataclasses import asdict
from pathlib import Path
from typing import Any

from mam.broker import embedded
from mam.errors import LockBusy, MamError
from mam.hooks import store_watch
from mam.jobs import heartbeat
from mam.node.service import Reply, Service
from mam.node.wire import LOCK, SOCKET, STATUS, Frames, frame
from mam.outcomes import Exit
from mam.panes import tmux_control
from mam.protocol import CONTROL, Invalid, check_request
from mam.settings import Settings, load_settings
from mam.store import jobs as jobs_table
from mam.store.db import keep_idle
from mam.store.registry import Registry
from mam.util.fdwait import readable
from mam.util.private import address
from mam.workspace import Workspace

log = logging.getLogger("mam.node")

READ_TIMEOUT_S = 10.0  # for a request's bytes once connected (the client sends them at once)
CHECK_S = 2.0  # how often an idle node looks at its socket, the tmux server, the open jobs and its code
MONITOR_RESTART_S = 30.0  # a monitor that could not run (another holds its lock) is tried again after this


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
        self.requests: set[Served] = set()
        self.controls = 0  # the node's own operations being answered (a `web` may take seconds to bind and start)
        self.service = Service(ws, settings, daemon=True)
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._why = ""
        self._close_webhook: Callable[[], None] = lambda: None  # set by the routines thread (mam.routines.node)
        self._ident: tuple[int, int] | None = None  # the socket file's (device, inode) while it is ours
        self._code = CodeWatch()
        self.monitor: Any = None
        self.web: Any = None  # mam.web.serve.Hosted while this node serves the page (`mam web`)
        self._web_lock = threading.Lock()

    # -- life ---------------------------------------------------------------------------------

    def serve(self, beside: Callable[[], int] | None = None, on_serving: Callable[[], None] | None = None) -> int:
        """Serve until stopped. `beside`: a runner's `run` (mam.remote.runner), run in this thread while
        the requests are served in another; the node ends with it, and its errors are the command's.
        `on_serving`: told once the node listens (a foreground node says so then)."""
        heartbeat.as_node()  # the heartbeats this process starts are threads of it
        keep_idle()  # this process opens the registry several times per job: its connections are kept
        tmux_control.serve(self.ws.run_dir / "tmux")  # one control client per tmux server, not a process per call
        listener = self._listen()
        self._write_status()
        threading.Thread(target=self._monitor, name="mam-node-monitor", daemon=True).start()
        threading.Thread(target=self._routines, name="mam-node-routines", daemon=True).start()
        threading.Thread(target=self._org, name="mam-node-org", daemon=True).start()
        threading.Thread(target=self._board, name="mam-node-board", daemon=True).start()
        threading.Thread(target=self._store_watch, name="mam-node-store-watch", daemon=True).start()
        log.info("serving workspace %s on %s (pid %d)", self.ws.root, self.path, os.getpid())
        if on_serving is not None:
            on_serving()
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
            self._close_webhook()  # its port is free before the node says it has gone
            self._remove_files()
            if self.monitor is not None:
                self.monitor.stop()
            heartbeat.hand_over()  # the jobs it beats for go on beating in processes of their own
            tmux_control.close_all()
            log.info("ended: %s", self._why or "stopped")
            self._end_broker()

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
            busy = bool(self.requests) or self.controls > 0
        if busy:
            return ""
        if self._code.changed():
            return "mam's code changed on disk"
        if self.web is not None and self.web.alive():
            return ""  # a page is served until `mam web --stop` or `mam node stop`
        if not self.autostarted or self.name:
            return ""
        if self._left():
            return ""
        return "the workspace's tmux server is not running and no job is open"

    def _left(self) -> str:
        """What still needs the node ('' when nothing does)."""
        if self._open_jobs():
            return "an open job"
        from mam.routines.node import keeps_node

        if keeps_node(self.ws):  # an enabled routine fires on its own schedule (mam.routines)
            return "an enabled routine"
        from mam.org.node import keeps_node as org_keeps_node

        if org_keeps_node(self.ws, self.settings):  # a task the node will wake (mam.org)
            return "a task to wake"
        if _tmux_running(self.ws, self.settings):
            return "the workspace's tmux server (its sessions)"
        return ""

    def _end_broker(self) -> None:
        """With nothing left, the embedded broker a command started on demand ends with the node."""

        try:
            if not embedded.started_on_demand(self.ws) or not embedded.status(self.ws).running:
                return
            left = self._left()
            if left:
                log.info("the embedded broker keeps running: %s is left", left)
                return
            stopped = embedded.stop(self.ws)
            log.info(
                "stopped the embedded broker (started on demand; nothing is left)"
                if not stopped.running
                else "the embedded broker did not stop"
            )
        except Exception as e:  # the node's end must not fail on this: the broker stays, as before
            log.warning("could not stop the embedded broker: %s", e)

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
        try:
            got = self._read_request(conn)
            if got is None:
                return
            frame_, pid = got
            try:
                op, args, env = check_request(frame_)
            except Invalid as e:
                conn.sendall(frame({"error": str(e), "exit": e.exit_code}))
                return
            if op in CONTROL:
                with self._lock:
                    self.controls += 1
                try:
                    answer = self._control(op, args)
                finally:
                    with self._lock:
                        self.controls -= 1
                conn.sendall(frame(answer))
                return
            if not self._enabled():
                conn.sendall(frame({"refused": "MAM_NODE=0 in .mam.env: run in the caller's process"}))
                return
            self._serve(Served(conn, op, args, env, pid))
        except OSError as e:
            log.info("a connection ended early: %s", e)
        finally:
            with contextlib.suppress(OSError):
                conn.shutdown(socket.SHUT_RDWR)  # wakes the thread reading it (a close alone would not)
            conn.close()

    def _read_request(self, conn: socket.socket) -> tuple[dict[str, Any], int] | None:
        """The first frame and the peer's pid; None for a peer of another user, a malformed frame or one not
        complete within READ_TIMEOUT_S. Descriptors sent with it are not taken (the kernel closes them)."""
        pid, uid, _gid = struct.unpack("3i", conn.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, 12))
        if uid != os.geteuid():
            log.warning("refused a connection from uid %d (pid %d)", uid, pid)
            return None
        frames = Frames()
        until = time.monotonic() + READ_TIMEOUT_S
        while True:
            left = until - time.monotonic()
            if left <= 0:
                log.info("a request from pid %d did not arrive within %.0f s", pid, READ_TIMEOUT_S)
                return None
            conn.settimeout(left)
            try:
                data = conn.recv(1 << 20)
            except TimeoutError:
                continue
            if not data:
                return None
            try:
                got = frames.feed(data)
            except ValueError as e:
                log.info("a malformed request from pid %d: %s", pid, e)
                return None
            if got:
                conn.settimeout(None)
                return got[0], pid

    def _control(self, op: str, args: dict[str, Any]) -> dict[str, Any]:
        """The node's own operations: answered at once, whatever else it is doing."""
        if op == "web":
            return self._serve_web(args)
        if op == "web_stop":
            return {"answer": {"stopped": self._stop_web()}, "exit": Exit.OK}
        if op == "web_logout":
            with self._web_lock:
                hosted = self.web
            ended = hosted.logout_all() if hosted is not None else 0
            return {"answer": {"ended": ended, "url": hosted.base() if hosted is not None else ""}, "exit": Exit.OK}
        if op == "status":
            return {"answer": self.status(), "exit": Exit.OK}
        if op == "fleet":  # null without a runner: the asker listens to the broker itself
            return {"answer": {"fleet": self.fleet() if self.fleet is not None else None, "name": self.name}, "exit": 0}
        self.stop("asked to stop (mam node stop)")
        return {"answer": {"stopping": True, "pid": os.getpid()}, "exit": Exit.OK}

    def status(self) -> dict[str, Any]:
        with self._lock:
            running = [{"op": r.op, "job": r.job, "pid": r.pid} for r in self.requests]
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

    def _serve_web(self, args: dict[str, Any]) -> dict[str, Any]:
        """Serve the page as `mam web` asks (host, port, token, token_source, tls_cert, tls_key), or answer
        with the one served already when it is the same; an error (and its exit code) if not."""

        from mam.web.serve import Hosted

        with self._web_lock:
            if self.web is not None and self.web.alive():
                if not self.web.same(**{k: args.get(k) for k in ("host", "port", "token", "tls_cert", "tls_key")}):
                    return {
                        "error": f"this node serves the page at {self.web.base()} already, with other "
                        "options or another token: stop it first (mam web --stop)",
                        "exit": Exit.USAGE,
                    }
                return {"answer": {**asdict(self.web.served()), "pid": os.getpid()}, "exit": Exit.OK}
            try:
                hosted = Hosted(
                    self.ws,
                    self.settings,
                    host=args["host"],
                    port=args["port"],
                    token=args["token"],
                    token_source=args["token_source"],
                    tls_cert=args.get("tls_cert"),
                    tls_key=args.get("tls_key"),
                )
                served = hosted.start()
            except MamError as e:
                return {"error": str(e), "exit": e.exit_code}
            self.web = hosted
            return {"answer": {**asdict(served), "pid": os.getpid()}, "exit": Exit.OK}

    def _stop_web(self) -> str:
        """Stop serving the page; the address it was served at ('' if none was)."""
        with self._web_lock:
            hosted, self.web = self.web, None
        if hosted is None:
            return ""
        hosted.stop()
        log.info("stopped serving the page at %s", hosted.base())
        return str(hosted.base())

    def _broker(self) -> dict[str, Any]:
        from mam.broker.survey import listing

        try:
            return listing(self.settings, self.ws, connect=False)
        except Exception as e:  # a status never fails for the broker's sake
            return {"error": str(e)}

    def _serve(self, request: Served) -> None:
        """Run one operation for its client, its frames sent back as it goes; then what it does next."""
        with self._lock:
            self.requests.add(request)
        threading.Thread(target=self._watch, args=(request,), name="mam-node-client", daemon=True).start()
        then = None
        try:
            request.reply.frame({"accepted": True})
            final, then = self.service.serve(request.op, request.args, request.env, request.reply)
            request.ended = True  # its client may close the connection as soon as it reads this
            request.reply.frame(final)
        finally:
            request.reply.gone.set()
            with self._lock:
                self.requests.discard(request)
            with contextlib.suppress(OSError):
                request.conn.shutdown(socket.SHUT_RDWR)  # the client has its answer: its watcher ends now
        if then is not None:
            then()  # a `--detach`ed delegation: the node drives its job to its end

    def _enabled(self) -> bool:
        """MAM_NODE=0 in the workspace's `.mam.env`: every request runs in its caller's process."""
        try:
            return bool(self.service.settings_for({}).node)
        except MamError:
            return True  # the operation itself reports bad settings, in the node as it would anywhere

    def _watch(self, request: Served) -> None:
        """Read what the client sends while its operation runs: a `leave` frame or its end (EOF) mean the
        client has gone (interrupted, killed); the operation runs on, its frames dropped."""
        frames = Frames()
        while not request.reply.gone.is_set():
            try:
                data = request.conn.recv(4096)
            except OSError:
                data = b""
            try:
                messages = frames.feed(data) if data else []
            except ValueError:
                messages, data = [], b""
            if not data or any("leave" in m for m in messages):
                if not request.reply.gone.is_set() and not request.ended:
                    log.info("client %d left (%s); job %s runs on", request.pid, request.op, request.job or "-")
                request.reply.gone.set()
                return

    # -- beside the requests --------------------------------------------------------------------

    def _monitor(self) -> None:
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

    def _board(self) -> None:
        from mam.board.keeper import keep

        try:
            keep(self.ws, self.settings, self._stop)  # the board's retained messages stay its current writes
        except Exception:
            log.exception("keeping the board's retained messages failed")

    def _store_watch(self) -> None:
        store_watch.serve(self.ws, self.settings, self._stop)  # activity read from the stores of CLIs that call no hook

    def _routines(self) -> None:
        from mam.routines.node import serve

        def wake(how: Callable[[], None]) -> None:
            self.service.wake_routines = how

        def closing(how: Callable[[], None]) -> None:
            self._close_webhook = how

        serve(self.ws, self.settings, self._stop, self.service.attempt, wake, closing)

    def _org(self) -> None:
        from mam.org.node import serve

        def wake(how: Callable[[], None]) -> None:
            self.service.wake_org = how

        serve(self.ws, self.settings, self._stop, self.service.attempt, wake)


class Served:
    """One client's operation running in this node."""

    def __init__(self, conn: socket.socket, op: str, args: dict[str, Any], env: dict[str, str], pid: int) -> None:
        self.conn, self.op, self.args, self.env, self.pid = conn, op, args, env, pid
        self.job = str(args.get("job") or args.get("job_id") or "")
        self.ended = False  # its final frame is on its way
        self._lock = threading.Lock()
        self.reply = Reply(self._send, client_pid=pid)

    def _send(self, msg: dict[str, Any]) -> None:
        if "job" in msg and isinstance(msg["job"], str):
            self.job = msg["job"]
        with self._lock:
            self.conn.sendall(frame(msg))


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
    """Whether a mam module this node loaded changed on disk since (it would serve stale code).

    Each look (every CHECK_S of an idle node) stats one of SLICES slices of the files, so a change is seen within
    SLICES looks: all ~140 files at every look cost an idle node 10 ms of CPU each time, half its main thread."""

    SLICES = 5

    def __init__(self) -> None:
        self.seen: dict[str, tuple[int, int]] = {}
        self._paths: list[str] = []
        self._modules = -1  # len(sys.modules) when _paths was made
        self._turn = 0
        self._changed(self._mam_files())

    def changed(self) -> bool:
        files = self._mam_files()
        turn, self._turn = self._turn, (self._turn + 1) % self.SLICES
        return self._changed(files[turn :: self.SLICES])

    def _mam_files(self) -> list[str]:
        if len(sys.modules) != self._modules:  # a module loaded since (modules are never unloaded)
            self._modules = len(sys.modules)
            # By name first: touching another package's module object could run its module-level __getattr__.
            mam = [m for name, m in list(sys.modules.items()) if name == "mam" or name.startswith("mam.")]
            self._paths = sorted({path for m in mam if (path := getattr(m, "__file__", None))})
        return self._paths

    def _changed(self, files: list[str]) -> bool:
        for path in files:
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
    on_serving: Callable[[], None] | None = None,
) -> int:
    """Be the workspace's node until stopped (SIGTERM, `mam node stop`); Exit.LOCK_BUSY when another
    node holds the lock. `beside`/`on_stop`/`fleet`: a runner's run, stop and fleet table (`mam node --name`).
    `on_serving`: told once the node listens with its SIGTERM handler in place."""
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
            return node.serve(beside, on_serving)
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
