"""The thin client: hand `mam job delegate`, `mam job wait` and `mam event` to the workspace's node.

This is the one module that bends around start-up time: it runs at the start of the `mam` console
script (mam.entry), before click, and imports only `_socket`, `_signal`, `os`, `time` and
mam.node.wire (no `json`, `re` or `typing`).
It sends the command line, the environment, the folder and the process ids as data, with stdin,
stdout and stderr attached, and waits for the command's exit code. `None` from `run` means "not
served": the caller runs the command in its own process, the same click command (mam.cli).

- `mam event` (an agent reporting): served by the node when one runs, else run here (no node is
  started for it: the emitter works the same in either process).
- `mam job delegate` / `mam job wait` / `mam job fanout` / `mam routine add|resume|run`: a node is started in the
  background when none runs, unless MAM_NO_AUTOSTART=1 or MAM_NODE=0 (the node also honours them
  from `.mam.env`: an autostarted node that finds them set there exits at once, and the command runs
  here).
- Interrupted (SIGINT, SIGTERM, SIGHUP), the client tells the node, which lets the job run on; the
  client prints `job ID is still running; follow it with: mam job wait ID` and exits 128 + the signal.
- The node gone mid-command (killed): the client starts another and follows the job with
  `mam job wait ID` there (the new node takes it over; a brief already typed is never typed again).

The `mam` script asks with its own streams, environment and folder. A library caller (mam.node.call:
the MCP server, a loop) asks with streams of its own and says how to run a command in its process
(`here`); its signals are its own business (none is forwarded), and a node that dies under it is
handled as for the script.
"""

from __future__ import annotations

import _signal
import _socket
import os
import sys
import time

from mam.node.wire import LOCK, LOG, SOCKET, Frames, frame
from mam.util.private import address, check_folder, private
from mam.util.root import STATE_DIR, find_root

TYPE_CHECKING = False  # not `typing`'s: importing it costs the client ~5 ms of its start
if TYPE_CHECKING:
    from typing import Any

FORWARDED = (_signal.SIGINT, _signal.SIGTERM, _signal.SIGHUP)
START_WAIT_S = 20.0  # for a node just started to listen (imports, on a loaded 2-core machine)
LEFT_WAIT_S = 5.0  # after an interrupt, for the node to name the job it leaves running
NODE_START = "import sys; del sys.path[0]; from mam.node.server import main; sys.exit(main())"
_OFF = frozenset({"0", "false", "no", "off"})


def command(argv: list[str]) -> str | None:
    """'event', 'delegate', 'wait', 'fanout' or 'routine' when `argv` (what follows `mam`) is a command the node serves,
    after global options only (`--workspace`/`-w DIR`, `--env-file F`); else None."""
    i = 0
    while i < len(argv) and argv[i].startswith("-"):
        if argv[i] in ("--workspace", "-w", "--env-file") and i + 1 < len(argv):
            i += 2
        elif argv[i].startswith(("--workspace=", "--env-file=")):
            i += 1
        else:
            return None  # --help, --version...: click, here
    rest = argv[i:]
    if rest[:1] == ["event"]:
        return "event"
    if "--help" in rest or "-h" in rest:
        return None
    if rest[:1] == ["job"] and rest[1:2] in (["delegate"], ["wait"], ["fanout"]):
        return rest[1]
    if rest[:1] == ["routine"] and rest[1:2] in (["add"], ["resume"], ["run"]):
        return "routine"  # the node fires routines: these start it (mam.routines)
    return None


def _workspace_arg(argv: list[str]) -> str | None:
    found = None
    for i, arg in enumerate(argv):
        if arg in ("--workspace", "-w") and i + 1 < len(argv):
            found = argv[i + 1]
        elif arg.startswith("--workspace="):
            found = arg.split("=", 1)[1]
    return found


def _flag(environ: Any, name: str, default: bool) -> bool:
    value = environ.get(name)
    if value is None or not value.strip():
        return default
    return value.strip().strip("'\"").lower() not in _OFF


class Asker:
    """Who asks the node: the `mam` script (by default: its own standard streams, environment and
    folder; it forwards its signals) or a library caller (streams of its own and `here`, which runs a
    command in the caller's process). `on_job`: told the job the command drives, once the node names it."""

    def __init__(
        self,
        streams: tuple[int, int, int] = (0, 1, 2),
        environ: Any = None,
        cwd: str | None = None,
        here: Any = None,
        on_job: Any = None,
    ) -> None:
        self.streams = streams
        self.environ = os.environ if environ is None else environ
        self.cwd = cwd
        self.here = here  # argv -> exit code; None: the `mam` script (the command runs in click, here)
        self.on_job = on_job

    def say(self, text: str) -> None:
        """A line of the client's own on the caller's stderr."""
        try:
            os.write(self.streams[2], text.encode())
        except OSError:
            pass


def run(
    argv: list[str],
    streams: tuple[int, int, int] = (0, 1, 2),
    *,
    environ: Any = None,
    cwd: str | None = None,
    here: Any = None,
    on_job: Any = None,
) -> int | None:
    """Run `mam <argv>` in the workspace's node and return its exit code; None: run it here. The
    `mam` script gives `argv` alone; a library caller its streams, environment, folder, `here` and
    `on_job` too (see Asker)."""
    who = Asker(streams, environ, cwd, here, on_job)
    which = command(argv)
    if which is None or not _flag(who.environ, "MAM_NODE", True):
        return None
    for fd in who.streams:  # a closed one would be taken by the socket and handed over as a stream
        try:
            os.fstat(fd)
        except OSError:
            return None
    root = find_root(_workspace_arg(argv))
    if root is None:
        return None  # not a workspace (or not plainly this user's): click says so, here
    run_dir = os.path.join(root, STATE_DIR, "run")
    if check_folder(run_dir):
        return None  # no private run folder (yet): the command here makes it, or refuses
    path = os.path.join(run_dir, SOCKET)
    sock = connect(path)
    if sock is None:
        if which == "event" or _flag(who.environ, "MAM_NO_AUTOSTART", False):
            return None
        sock = start(root, run_dir, who.environ)
        if sock is None:
            return None
    if which == "delegate":
        argv = with_job_id(argv)
    return _served(sock, argv, root, run_dir, who)


def with_job_id(argv: list[str]) -> list[str]:
    """`argv` with a `--job-id` of its own (a new id, unless it has one): if the node dies, the same
    command runs again in the next node and takes its own job over (mam.jobs.delegate: a brief
    already typed is never typed again; one not typed yet is typed once)."""
    if any(a == "--job-id" or a.startswith("--job-id=") for a in argv):
        return argv
    at = argv.index("delegate") + 1
    return [*argv[:at], "--job-id", f"job-{os.urandom(8).hex()}", *argv[at:]]


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
    """Start a node for `root` in the background (unless one is starting) and connect to it.
    `environ`: the caller's environment, which the node starts with (see node_environ)."""
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


def ask(path: str, op: str, timeout: float = 5.0, **fields: Any) -> dict[str, Any] | None:
    """One question to the node (`status`, `stop`, `fleet`, `web`, `web-stop`): its answer, or None when
    none answers."""
    sock = connect(path)
    if sock is None:
        return None
    try:
        sock.settimeout(timeout)
        sock.sendall(frame({"op": op, **fields}))
        frames = Frames()
        while True:
            data = sock.recv(65536)
            if not data:
                return None
            for msg in frames.feed(data):
                return msg
    except (OSError, ValueError):
        return None
    finally:
        sock.close()


class _Interrupted(Exception):
    """A signal the caller forwarded to the node (raised by its handler)."""


class _Session:
    """One request's exchange with the node."""

    def __init__(self, sock: _socket.socket, who: Asker) -> None:
        self.sock = sock
        self.who = who
        self.frames = Frames()
        self.accepted = False
        self.refused = False  # the node said the command runs in the caller (MAM_NODE=0 in its settings)
        self.job = ""  # the last job the command named (the one to follow if the node dies)
        self.jobs: list[str] = []  # every job it named (a fan-out names several)
        self.signum = 0

    def send(self, argv: list[str]) -> bool:
        request = {
            "argv": argv,
            "env": dict(self.who.environ),
            "cwd": self.who.cwd or os.getcwd(),
            "pid": os.getpid(),
            "ppid": os.getppid(),
        }
        fds = b"".join(fd.to_bytes(4, sys.byteorder, signed=True) for fd in self.who.streams)
        data = frame(request)
        try:
            sent = self.sock.sendmsg([data], [(_socket.SOL_SOCKET, _socket.SCM_RIGHTS, fds)])
            if sent < len(data):
                self.sock.sendall(data[sent:])
        except OSError:
            return False
        return True

    def interrupted(self, signum: int, _frame: object) -> None:
        if self.signum:
            return
        self.signum = signum
        try:
            self.sock.sendall(frame({"signal": signum}))
        except OSError:
            pass
        raise _Interrupted  # out of a blocking recv (which a handler's return would resume)

    def answer(self) -> int | None:
        """The exit code; None when the node went away before it took the request (run it here) or
        after (the caller follows the job, `self.job`, elsewhere)."""
        while True:
            try:
                return self._answer()
            except _Interrupted:
                if self.job:
                    return self.left()
                self.sock.settimeout(LEFT_WAIT_S)  # for the node to name the job it lets run on

    def _answer(self) -> int | None:
        while True:
            try:
                data = self.sock.recv(65536)
            except (InterruptedError, TimeoutError):
                if self.signum:
                    return None
                continue
            except OSError:
                return None
            if not data:
                return None
            try:
                messages = self.frames.feed(data)
            except ValueError:
                return None
            for msg in messages:
                if "refused" in msg and not self.accepted:
                    self.refused = True
                    return None
                if msg.get("accepted"):
                    self.accepted = True
                elif "job" in msg:
                    self.job = str(msg["job"])
                    if self.job not in self.jobs:
                        self.jobs.append(self.job)
                    if self.signum:
                        return self.left()
                    if self.who.on_job is not None:
                        self.who.on_job(self.job)
                elif "exit" in msg:
                    return self.left() if self.signum and self.job else int(msg["exit"])

    def left(self) -> int:
        for job in self.jobs or [self.job]:
            self.who.say(f"job {job} is still running; follow it with: mam job wait {job}\n")
        return 128 + self.signum


def _served(
    sock: _socket.socket, argv: list[str], root: str, run_dir: str, who: Asker, *, retry: bool = True
) -> int | None:
    """The command's exit code from the node on `sock`; None: run it here. `retry`: a node that went away before it
    took the request (one being killed still accepts a connection) is replaced and asked again (`again`)."""
    talk = _Session(sock, who)
    try:
        if not talk.send(argv):
            return again(argv, root, run_dir, who) if retry and _may_start(argv, who) else None
        for signum in FORWARDED if who.here is None else ():  # a library caller's signals are its own
            try:
                if _signal.getsignal(signum) != _signal.SIG_IGN:  # ignored (nohup, a background job) stays so
                    _signal.signal(signum, talk.interrupted)
            except (OSError, ValueError):
                pass
        code = talk.answer()
    finally:
        sock.close()
    if code is not None:
        return code
    if talk.signum:
        talk.job = talk.job or _job_id(argv)  # the node runs the command on: its job will exist
        if talk.job:
            return talk.left()
        who.say("mam: interrupted\n")
        return 128 + talk.signum
    if not talk.accepted:  # it never took the request: nothing ran
        if retry and not talk.refused and _may_start(argv, who):
            return again(argv, root, run_dir, who)
        return None
    if command(argv) == "event":
        return None  # run here (if the node stored it before it died, the copy changes nothing)
    # The node died while it ran the command: the next node runs it again. A delegation has its own
    # `--job-id` (with_job_id), so it takes its job over there; one whose brief came from stdin (read
    # already) follows its job with `mam job wait`.
    job = talk.job or _job_id(argv)
    if command(argv) == "delegate" and not _brief_from_stdin(argv):
        who.say("mam: the node ended; running the command again in a new one\n")
        return again(argv, root, run_dir, who)
    if not job:
        who.say("mam: error: the node ended before the command had a job; see .mam/run/node.log\n")
        return 1
    who.say(f"mam: the node ended; following job {job} with a new one\n")
    return follow(job, "--json" in argv, root, run_dir, who)


def _job_id(argv: list[str]) -> str:
    for i, arg in enumerate(argv):
        if arg == "--job-id" and i + 1 < len(argv):
            return argv[i + 1]
        if arg.startswith("--job-id="):
            return arg.split("=", 1)[1]
    return ""


def _brief_from_stdin(argv: list[str]) -> bool:
    return any(a == "--brief-file=-" or (a == "-" and i and argv[i - 1] == "--brief-file") for i, a in enumerate(argv))


def _may_start(argv: list[str], who: Asker) -> bool:
    """Whether a command the node never took may start another node for itself (an agent's event runs here)."""
    return command(argv) != "event" and not _flag(who.environ, "MAM_NO_AUTOSTART", False)


def again(argv: list[str], root: str, run_dir: str, who: Asker) -> int:
    """`argv` once more in a node (a new one if need be), else here."""
    for _attempt in range(3):
        sock = connect(os.path.join(run_dir, SOCKET)) or start(root, run_dir, who.environ)
        if sock is None:
            break
        code = _served(sock, argv, root, run_dir, who, retry=False)
        if code is not None:
            return code
    if who.here is not None:
        return int(who.here(argv))
    from mam.cli import cli
    from mam.cli.common import run_cli

    return run_cli(cli, argv)


def follow(job: str, as_json: bool, root: str, run_dir: str, who: Asker) -> int:
    """`mam job wait JOB` in a node (a new one if need be), else here: never the original command again."""
    return again(["--workspace", root, "job", "wait", job] + (["--json"] if as_json else []), root, run_dir, who)
