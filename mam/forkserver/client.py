"""The caller's side of the forkserver (see mam/forkserver/__init__.py): hand a `mam job delegate`
command to the workspace's warm forkserver and wait for its child to end.

This runs at the start of the `mam` console script, so it imports nothing slow: the C modules
`_socket` and `_signal` (not `socket` and `signal`, whose enum set-up costs milliseconds),
`marshal` for the few messages, `fcntl` only to start a forkserver.

Messages are frames of a 4-byte big-endian length and a marshal'd dict (both ends are this user's
processes running the same mam tree: the server checks the peer's uid, the client the socket's
owner and mode). Client -> server: one request with the caller's stdin/stdout/stderr attached
(SCM_RIGHTS); later `{"kill": signum}` to forward a signal. Server or child -> client:
`{"refused": why}` (nothing was started: run the command here), `{"pid": n}` (the child runs it),
`{"exit": code}` (the child's end), `{"signal": n}` (the child died of signal n).
"""

from __future__ import annotations

import _signal
import _socket
import marshal
import os
import sys

from mam.util.private import address, check_folder, private
from mam.util.root import ENV_FILE, STATE_DIR, find_root

SOCKET, LOCK, LOG = "forkserver.sock", "forkserver.lock", "forkserver.log"
SERVER_MODULE = "mam.forkserver.server"
SERVER_START = f"import sys; del sys.path[0]; from {SERVER_MODULE} import main; sys.exit(main())"
FORWARDED = (_signal.SIGINT, _signal.SIGTERM, _signal.SIGHUP)
HEADER = 4
MAX_FRAME = 64 << 20  # a brief is at most a few MB (mam.jobs.brief); an environment a few hundred KB
_OFF = frozenset({"0", "false", "no", "off", ""})


def frame(obj: dict[str, object]) -> bytes:
    data = marshal.dumps(obj)
    return len(data).to_bytes(HEADER, "big") + data


class Frames:
    """Cuts a byte stream into the dicts it carries."""

    def __init__(self) -> None:
        self.buf = b""

    def feed(self, data: bytes) -> list[dict[str, object]]:
        self.buf += data
        out = []
        while len(self.buf) >= HEADER:
            size = int.from_bytes(self.buf[:HEADER], "big")
            if size > MAX_FRAME:
                raise ValueError(f"a forkserver frame of {size} bytes")
            if len(self.buf) < HEADER + size:
                break
            obj = marshal.loads(self.buf[HEADER : HEADER + size])
            self.buf = self.buf[HEADER + size :]
            out.append(obj if isinstance(obj, dict) else {})
        return out


# The dynamic loader's and the interpreter's variables that change what code a process runs (LD_PRELOAD,
# LD_LIBRARY_PATH, LD_AUDIT..., PYTHONPATH, PYTHONHOME, PYTHONSTARTUP...): a forkserver child runs what
# the forkserver loaded, so these must be the caller's exactly. PYTHONUNBUFFERED the child applies itself.
LOADER_PREFIXES = ("LD_", "PYTHON", "GCONV_PATH")
CHILD_APPLIES = frozenset({"PYTHONUNBUFFERED"})


def loader_env(environ: dict[str, str] | None = None) -> list[tuple[str, str]]:
    environ = dict(os.environ) if environ is None else environ
    return sorted((k, v) for k, v in environ.items() if k.startswith(LOADER_PREFIXES) and k not in CHILD_APPLIES)


def relative_paths(environ: dict[str, str] | None = None) -> bool:
    """True if PYTHONPATH (or LD_LIBRARY_PATH) names a folder by a relative path (`.`, `''`, `src`):
    the same string means another folder in another working folder, so such a caller is never served
    and never starts a forkserver (whose start would import from the caller's folder)."""
    environ = dict(os.environ) if environ is None else environ
    for key in ("PYTHONPATH", "LD_LIBRARY_PATH"):
        value = environ.get(key)
        if value and any(not part.startswith("/") for part in value.split(":")):
            return True
    return False


def identity() -> dict[str, object]:
    """What must match between a client and the forkserver that serves it: the interpreter, the mam
    tree, the loader's and the interpreter's variables (`loader_env`), and the process's confinement
    (namespaces, cgroup, seccomp and no_new_privs), so that a forkserver started inside a sandbox never
    serves a caller outside it, nor the other way round."""
    return {
        "executable": sys.executable,
        "mam": os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
        "loader_env": loader_env(),
        "confinement": _confinement(),
    }


def _confinement() -> str:
    parts = []
    for ns in ("cgroup", "ipc", "mnt", "net", "pid", "user", "uts"):
        try:
            parts.append(os.readlink(f"/proc/self/ns/{ns}"))
        except OSError:
            parts.append(f"{ns}:?")
    for path in ("/proc/self/cgroup", "/proc/self/status"):
        try:
            with open(path, encoding="utf-8", errors="replace") as f:
                text = f.read()
        except OSError:
            text = "?"
        if path.endswith("status"):
            text = " ".join(line for line in text.splitlines() if line.startswith(("Seccomp:", "NoNewPrivs:")))
        parts.append(text.strip())
    return "|".join(parts)


def served(argv: list[str]) -> bool:
    """`argv` (what follows `mam`) is a command the forkserver takes: `job delegate`, after at most a
    global `--workspace`/`-w DIR`."""
    rest = _after_globals(argv)
    return rest is not None and rest[:2] == ["job", "delegate"]


def _after_globals(argv: list[str]) -> list[str] | None:
    i = 0
    while i < len(argv) and argv[i].startswith("-"):
        if argv[i] in ("--workspace", "-w") and i + 1 < len(argv):
            i += 2
        elif argv[i].startswith("--workspace="):
            i += 1
        else:
            return None  # --env-file, --help, --version...: the full path
    return argv[i:]


def _workspace_arg(argv: list[str]) -> str | None:
    """The last `--workspace`/`-w` value: only to find a forkserver; the child's CLI resolves the
    workspace again, by its own rules, from the same argv."""
    found = None
    for i, arg in enumerate(argv):
        if arg in ("--workspace", "-w") and i + 1 < len(argv):
            found = argv[i + 1]
        elif arg.startswith("--workspace="):
            found = arg.split("=", 1)[1]
    return found


def _setting(root: str, key: str) -> str | None:
    """A boolean setting's raw value: the environment, else the workspace's .mam.env, else None."""
    value = os.environ.get(key)
    if value is None:
        value = _env_file_value(os.path.join(root, ENV_FILE), key)
    return None if value is None else value.strip().strip("'\"").lower()


def enabled(root: str) -> bool:
    """MAM_FORKSERVER, on unless set off."""
    value = _setting(root, "MAM_FORKSERVER")
    return value is None or value not in _OFF


def may_start(root: str) -> bool:
    """MAM_NO_AUTOSTART=1 starts nothing on demand: a running forkserver serves, none is started."""
    value = _setting(root, "MAM_NO_AUTOSTART")
    return value is None or value in _OFF


def _env_file_value(path: str, key: str) -> str | None:
    """The last `KEY=value` of a settings file (the lean reading: comments, `export` and quotes; anything
    stranger is the settings module's to parse and to reject)."""
    try:
        with open(path, encoding="utf-8") as f:
            lines = f.read().splitlines()
    except (OSError, UnicodeDecodeError):
        return None
    found = None
    for line in lines:
        line = line.strip()
        if line.startswith("export "):
            line = line[7:].lstrip()
        name, sep, value = line.partition("=")
        if sep and name.strip() == key:
            found = value.split(" #", 1)[0].strip()
    return found


def run(argv: list[str]) -> int | None:
    """Run `mam <argv>` in a forkserver child and return its exit code; None: not served here (run it
    in this process). May start a forkserver for the next call."""
    for fd in (0, 1, 2):  # a closed one would be taken by the socket and handed over as the child's stdio
        try:
            os.fstat(fd)
        except OSError:
            return None
    if relative_paths():
        return None
    root = find_root(_workspace_arg(argv))
    if root is None or not enabled(root):
        return None
    run_dir = os.path.join(root, STATE_DIR, "run")
    if check_folder(run_dir):
        return None  # no private run folder (yet): the full path makes it, or refuses
    sock = _connect(os.path.join(run_dir, SOCKET))
    if sock is None:
        if may_start(root):
            start_server(root, run_dir)
        return None
    try:
        return _handed(sock, argv)
    finally:
        sock.close()


def _connect(path: str) -> _socket.socket | None:
    try:
        st = os.lstat(path)
    except OSError:
        return None
    if not (st.st_mode & 0o170000 == 0o140000 and private(st)):  # a socket of this user, mode 0600
        return None
    sock = _socket.socket(_socket.AF_UNIX, _socket.SOCK_STREAM | _socket.SOCK_CLOEXEC)
    fd = -1
    try:
        where, fd = address(path)
        sock.settimeout(2.0)
        sock.connect(where)
        sock.settimeout(None)
    except OSError:
        sock.close()
        return None
    finally:
        if fd >= 0:
            os.close(fd)
    return sock


def _handed(sock: _socket.socket, argv: list[str]) -> int | None:
    """Send the request; None if the forkserver refused it (nothing ran), else the child's exit code."""
    mask = os.umask(0o077)
    os.umask(mask)
    request = {
        "argv": [sys.argv[0] if sys.argv else "mam", *argv],
        "env": dict(os.environ),
        "cwd": os.getcwd(),
        "umask": mask,
        "streams": [_stream(s) for s in (sys.stdin, sys.stdout, sys.stderr)],
        "ignored": [n for n in FORWARDED if _signal.getsignal(n) == _signal.SIG_IGN],
        "blocked": sorted(int(n) for n in _signal.pthread_sigmask(_signal.SIG_BLOCK, ())),
        **identity(),
    }
    fds = b"".join(fd.to_bytes(4, sys.byteorder, signed=True) for fd in (0, 1, 2))
    data = frame(request)
    try:
        sent = sock.sendmsg([data], [(_socket.SOL_SOCKET, _socket.SCM_RIGHTS, fds)])
        if sent < len(data):
            sock.sendall(data[sent:])
    except OSError:
        return None  # the forkserver went away before it read a thing
    frames = Frames()
    pid = 0
    heard = False  # once anything came back, a child may run: never run the command here as well
    while True:
        try:
            data = sock.recv(65536)
        except InterruptedError:
            continue
        except OSError as e:
            if not heard:
                return None  # reset before it answered (it was ending): the child sends its pid before all else
            sys.stderr.write(f"mam: error: lost the forkserver's connection: {e}\n")
            return 1
        if not data:
            break
        heard = True
        for msg in frames.feed(data):
            if "refused" in msg and not pid:
                return None
            if "pid" in msg and not pid:
                pid = int(msg["pid"])  # type: ignore[call-overload]
                _forward_signals(sock)
            elif "exit" in msg:
                code: int = int(msg["exit"])  # type: ignore[call-overload]
                return code
            elif "signal" in msg:
                _die_of(int(msg["signal"]))  # type: ignore[call-overload]
    if not heard:
        return None  # it ended the connection before it forked: nothing was started
    sys.stderr.write(f"mam: error: the forkserver's child {pid or '?'} ended without an exit status\n")
    return 1


def _stream(stream: object) -> tuple[str, str]:
    return (str(getattr(stream, "encoding", "") or "utf-8"), str(getattr(stream, "errors", "") or "strict"))


def _forward_signals(sock: _socket.socket) -> None:
    def forward(signum: int, _frame: object) -> None:
        try:
            sock.sendall(frame({"kill": signum}))
        except OSError:
            pass

    for signum in FORWARDED:
        try:
            if _signal.getsignal(signum) != _signal.SIG_IGN:  # ignored (nohup, a background job) stays ignored
                _signal.signal(signum, forward)
        except (OSError, ValueError):
            pass


def _die_of(signum: int) -> None:
    """End this process the way the child ended: by the same signal."""
    sys.stdout.flush()
    sys.stderr.flush()
    try:
        _signal.signal(signum, _signal.SIG_DFL)
    except (OSError, ValueError):
        os._exit(128 + signum)
    os.kill(os.getpid(), signum)
    os._exit(128 + signum)


def start_server(root: str, run_dir: str) -> None:
    """Start a forkserver for `root` in the background unless one runs or is starting (it holds the lock)."""
    import fcntl

    try:
        fd = os.open(os.path.join(run_dir, LOCK), os.O_RDWR | os.O_CREAT | os.O_CLOEXEC | os.O_NOFOLLOW, 0o600)
    except OSError:
        return
    try:
        if not private(os.fstat(fd)):
            return
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            return  # one runs, or is starting
        os.set_inheritable(fd, True)  # the lock passes to the server with this descriptor
        log = os.path.join(run_dir, LOG)
        # Not `-m`: that puts the caller's working folder first on sys.path, for every child to import from.
        argv = [sys.executable, "-c", SERVER_START, "--workspace", root, "--lock-fd", str(fd)]
        actions = [
            (os.POSIX_SPAWN_OPEN, 0, os.devnull, os.O_RDONLY, 0),
            (os.POSIX_SPAWN_OPEN, 1, log, os.O_WRONLY | os.O_CREAT | os.O_APPEND | os.O_NOFOLLOW, 0o600),
            (os.POSIX_SPAWN_DUP2, 1, 2),
        ]
        try:
            os.posix_spawn(sys.executable, argv, dict(os.environ), file_actions=actions, setsid=True)
        except OSError:
            return
    finally:
        os.close(fd)
