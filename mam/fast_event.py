"""The fast path of `mam event ...`: the usual event of a local job in about the cost of starting Python.

An agent runs `mam event` once per event, so this module imports nothing slow: no click, no paho,
no YAML, no dataclasses, no pathlib, no json package and no `re`; only sqlite3, sha256, the C JSON
accelerators (mam.util.lean_json) and a socket. It does what the full
path (mam.event_cli over mam.jobs.emit) does, in the same order and with the same result:

1. find the workspace as mam.workspace does, and go on only if `.mam/` is a real folder of this
   user with mode 0700 and `.mam.env` (if any) a regular file of this user nobody else may write;
2. read the job's 0600 record (its token, its nonce, whether a runner relays its events);
3. under the job's lock, in one `BEGIN IMMEDIATE` transaction: check the job is still open,
   allocate the next seq, sign the canonical envelope with the job's token (HMAC-SHA256, as
   mam.bus.envelope) and record it;
4. wake the job's wrapper over its Unix socket (mam.jobs.wake), which relays the event to MQTT;
   if no wrapper listens, publish it here (paho is imported then) and wait for the broker's ack,
   still under the lock; if the broker is down too, the event stays on disk, with a warning.

Anything else, before anything is written (help, a usage error, `--report` or `--tokens`, a
missing or foreign file, an ended job, a registry in another journal mode or schema, text UTF-8
cannot encode, an event too big for the wire), returns None: the caller runs the full path, which
gives the same error, exit code or result as it always has. tests/unit/test_fast_event.py keeps
the constants below equal to the modules they mirror.
"""

from __future__ import annotations

import fcntl
import math
import os
import sqlite3
import sys
import time

from mam.errors import UsageError
from mam.ids import check_job_id
from mam.jobs import wake
from mam.jobs.outcomes import OPEN_STATES, Exit
from mam.store import write_queue
from mam.util import lean_json
from mam.util.root import STATE_DIR, find_root

# Mirrors of constants of modules too slow to import here (checked equal by the tests).
DB_FILE = "agent-sessions.db"  # mam.workspace
VERSION = 2  # mam.bus.envelope.VERSION
MAX_EVENT_BYTES = 64 * 1024  # mam.bus.envelope.MAX_EVENT_BYTES
MAX_INT = 2**53  # mam.bus.envelope.MAX_INT
SCHEMA_VERSION = 10  # mam.store.db.SCHEMA_VERSION (a new migration: bump it, or every event takes the full path)
BUSY_TIMEOUT_MS = 120_000  # mam.store.db.BUSY_TIMEOUT_MS
MAX_TEXT = 4000  # what mam.event_cli keeps of a message or reason

# command -> (its options with a value, the required ones); `--json` and `-w/--workspace` on every command.
COMMANDS: dict[str, tuple[frozenset[str], frozenset[str]]] = {
    "started": (frozenset({"--job", "--nonce", "--heartbeat"}), frozenset({"--job"})),
    "progress": (frozenset({"--job", "--message"}), frozenset({"--job", "--message"})),
    "heartbeat": (frozenset({"--job"}), frozenset({"--job"})),
    "completed": (frozenset({"--job", "--message"}), frozenset({"--job"})),
    "error": (frozenset({"--job", "--reason"}), frozenset({"--job", "--reason"})),
}
WHERE = {
    "broker": "published",
    "wrapper": "handed to the wrapper",
    "runner": "on disk, for the runner to relay",
    "disk": "on disk only",
}


def run(argv: list[str]) -> int | None:
    """Record and hand on the event `argv` (what follows `mam event`) describes; None: run the full path."""
    parsed = parse(argv)
    if parsed is None:
        return None
    command, opts = parsed
    job_id = str(opts["--job"])
    if not _is_id(job_id):
        return None
    root = find_root(opts.get("--workspace"))
    if root is None:
        return None
    state = os.path.join(root, STATE_DIR)
    record = _record(state, job_id)
    if record is None:
        return None
    body = _body(command, opts, record)
    if body is None:
        return None
    done = _emit(root, state, job_id, command, body, record)
    if done is None:
        return None
    seq, via, warning = done
    if warning:
        sys.stderr.write(f"mam: warning: {warning}\n")
    if opts.get("--json"):
        shown = {"job": job_id, "seq": seq, "type": command, "published": via == "broker", "via": via}
        import json  # only for --json: it imports `re`

        sys.stdout.write(json.dumps(shown, indent=2, sort_keys=True, ensure_ascii=False) + "\n")
    else:
        sys.stdout.write(f"{command} recorded for {job_id} (seq {seq}, {WHERE[via]})\n")
    if command == "started" and "--heartbeat" in opts:
        _fork_heartbeater(root, job_id, float(opts["--heartbeat"]))
    return Exit.OK


def parse(argv: list[str]) -> tuple[str, dict[str, str | bool]] | None:
    """(command, options) for the plain forms the brief's footer prints; None for anything else."""
    if not argv or argv[0] not in COMMANDS:
        return None
    command = argv[0]
    valued, required = COMMANDS[command]
    opts: dict[str, str | bool] = {}
    args = argv[1:]
    i = 0
    while i < len(args):
        arg = args[i]
        i += 1
        name, value = arg, None
        if arg.startswith("--") and "=" in arg:
            name, value = arg.split("=", 1)
        elif arg.startswith("-w") and not arg.startswith("--"):
            name, value = "--workspace", (arg[2:] or None)
        if name == "--json" and value is None:
            opts[name] = True
            continue
        if name != "--workspace" and name not in valued:
            return None  # help, an unknown option, --report, --tokens, an extra argument...
        if value is None:
            if i >= len(args):
                return None
            value = args[i]
            i += 1
        opts[name] = value
    if not required <= opts.keys():
        return None
    return command, opts


def _is_id(value: str) -> bool:
    try:
        check_job_id(value)
    except UsageError:
        return False
    return True


def _record(state: str, job_id: str) -> dict[str, object] | None:
    try:
        with open(os.path.join(state, "jobs", f"{job_id}.json"), encoding="utf-8") as f:
            data = lean_json.loads(f.read())
    except (OSError, ValueError):
        return None
    if not isinstance(data, dict) or not isinstance(data.get("token"), str) or not data["token"]:
        return None
    if not isinstance(data.get("topic_prefix"), str) and data.get("relay") != "runner":
        return None
    return data


def _body(command: str, opts: dict[str, str | bool], record: dict[str, object]) -> dict[str, object] | None:
    def text(name: str) -> str:
        value = opts.get(name, "")
        return value[:MAX_TEXT] if isinstance(value, str) else ""

    if command == "started":
        nonce = opts.get("--nonce")
        body: dict[str, object] = (
            {"nonce": nonce}
            if isinstance(nonce, str)
            else {"nonce": str(record.get("nonce", "")), "nonce_from": "record"}
        )
        if "--heartbeat" in opts:
            try:
                seconds = float(str(opts["--heartbeat"]))
            except ValueError:
                return None
            if not math.isfinite(seconds) or seconds <= 0 or not 0 < int(seconds * 1000) < MAX_INT:
                return None
            body["heartbeat_ms"] = int(seconds * 1000)
        return body
    if command == "progress":
        return {"message": text("--message")}
    if command == "completed":
        return {"message": text("--message")}
    if command == "error":
        return {"reason": text("--reason")}
    return {}


def hmac_sha256(key: bytes, data: bytes) -> str:
    """hmac.new(key, data, hashlib.sha256).hexdigest() (RFC 2104) over the built-in SHA-256: the hmac and
    hashlib modules load OpenSSL, a few milliseconds of every `mam event`."""
    try:
        from _sha256 import sha256  # type: ignore[import-not-found,unused-ignore]  # Python 3.11
    except ImportError:  # Python 3.12 on
        from _sha2 import sha256  # type: ignore[import-not-found,no-redef,unused-ignore]
    if len(key) > 64:
        key = sha256(key).digest()
    key = key.ljust(64, b"\0")
    inner = sha256(bytes(b ^ 0x36 for b in key) + data).digest()
    return str(sha256(bytes(b ^ 0x5C for b in key) + inner).hexdigest())


def canonical(obj: dict[str, object]) -> bytes:
    """mam.bus.envelope.canonical for what this module builds (no floats, no deep nesting by construction)."""
    return lean_json.canonical(obj).encode("utf-8")


def _emit(
    root: str,
    state: str,
    job_id: str,
    type: str,
    body: dict[str, object],
    record: dict[str, object],
    sender: str = "agent",
    publish: bool = True,
) -> tuple[int, str, str] | None:
    """(seq, where it went, a warning) once the event is committed; None with nothing written."""
    db = os.path.join(state, DB_FILE)
    if not os.path.isfile(db):
        return None
    relayed = record.get("relay") == "runner"
    try:
        conn = sqlite3.connect(db, timeout=BUSY_TIMEOUT_MS / 1000, isolation_level=None)
    except sqlite3.Error:
        return None
    try:
        if not _ready(conn):
            return None
        locks = os.path.join(state, "locks")
        try:
            os.makedirs(locks, mode=0o700, exist_ok=True)
            lock = open(os.path.join(locks, f"job-{job_id}.lock"), "a")  # noqa: SIM115 - closed below
        except OSError:
            return None
        with lock:
            fcntl.flock(lock.fileno(), fcntl.LOCK_EX)  # released when closed
            queue = write_queue.open_lock(os.path.join(state, DB_FILE))  # the writers' turn, as the full path
            try:
                write_queue.take(queue)
                stored = _store(conn, job_id, type, body, str(record["token"]), relayed, sender)
            finally:
                if queue >= 0:
                    os.close(queue)  # closing it unlocks it
            if stored is None:
                return None
            # Committed: from here on nothing may return None (the full path would record it again).
            seq, raw = stored
            if relayed:
                return seq, "runner", ""
            if not wake.send(os.path.join(state, "run"), job_id):
                return seq, "wrapper", ""
            if not publish:
                return seq, "disk", ""
            via, warning = _publish(root, str(record["topic_prefix"]), job_id, raw)
            return seq, via, warning
    finally:
        conn.close()


def _ready(conn: sqlite3.Connection) -> bool:
    """The registry is one this module can write as mam.store.db does: this schema, in WAL mode."""
    try:
        conn.execute(f"PRAGMA busy_timeout={BUSY_TIMEOUT_MS}")
        if conn.execute("PRAGMA user_version").fetchone()[0] != SCHEMA_VERSION:
            return False
        if str(conn.execute("PRAGMA journal_mode").fetchone()[0]).lower() != "wal":
            return False  # mam.store.db sets the mode (and knows network filesystems)
        conn.execute("PRAGMA synchronous=NORMAL")
    except sqlite3.Error:
        return False
    return True


def _store(
    conn: sqlite3.Connection,
    job_id: str,
    type: str,
    body: dict[str, object],
    token: str,
    relayed: bool,
    sender: str = "agent",
) -> tuple[int, bytes] | None:
    """Allocate the seq, sign and record the event in one transaction; None (rolled back) if it is not for here."""
    try:
        conn.execute("BEGIN IMMEDIATE")
    except sqlite3.Error:
        return None
    try:
        row = conn.execute("SELECT state FROM jobs WHERE id=?", (job_id,)).fetchone()
        if row is None or row[0] not in OPEN_STATES:
            _rollback(conn)
            return None
        conn.execute("INSERT OR IGNORE INTO seqs(job_id, last) VALUES (?, 0)", (job_id,))
        conn.execute("UPDATE seqs SET last = last + 1 WHERE job_id=?", (job_id,))
        seq = int(conn.execute("SELECT last FROM seqs WHERE job_id=?", (job_id,)).fetchone()[0])
        ts = int(time.time() * 1000)
        env: dict[str, object] = {
            "v": VERSION,
            "kind": "event",
            "job": job_id,
            "seq": seq,
            "type": type,
            "sender": sender,
            "ts": ts,
            "body": body,
        }
        sig = hmac_sha256(token.encode("utf-8"), canonical(env))
        raw = canonical({**env, "sig": sig})
        if len(raw) > MAX_EVENT_BYTES:
            _rollback(conn)
            return None
        conn.execute(
            "INSERT INTO events(job_id, seq, type, sender, ts, raw, recorded_at, published) VALUES (?,?,?,?,?,?,?,?)",
            (job_id, seq, type, sender, ts, raw.decode("utf-8"), time.time(), int(not relayed)),
        )
        conn.execute("COMMIT")
    except (UnicodeError, sqlite3.Error):  # a lone surrogate from argv; a registry this module cannot write
        _rollback(conn)
        return None
    except BaseException:
        _rollback(conn)
        raise
    return seq, raw


def _rollback(conn: sqlite3.Connection) -> None:
    try:
        conn.execute("ROLLBACK")
    except sqlite3.Error:
        pass  # (no transaction left: COMMIT itself failed and SQLite rolled back)


def _publish(root: str, prefix: str, job_id: str, raw: bytes) -> tuple[str, str]:
    """No wrapper listens: publish the recorded event ourselves (QoS 1, waiting for the ack), as mam.jobs.emit."""
    from pathlib import Path

    from mam.bus.opener import opener
    from mam.bus.topics import Topics
    from mam.errors import BrokerError
    from mam.workspace import Workspace

    try:
        client = opener(Workspace(Path(root)), "agent", warn=True, reconnect=False)()
    except BrokerError as e:
        return "disk", f"{e}; the event is recorded on disk"
    try:
        client.publish(Topics(prefix).events(job_id), raw, qos=1, timeout=5.0, give_up_on_disconnect=True)
    except BrokerError as e:
        return "disk", f"{e}; the event is recorded on disk"
    finally:
        client.close()
    return "broker", ""


def _fork_heartbeater(root: str, job_id: str, interval_s: float) -> None:
    """Fork the heartbeater; it imports what it needs (the emitter, the store...) after the fork, and only
    once the job outlives its first interval, so this command ends without paying for them and a short
    job's heartbeater never does."""
    from mam.util.fork import AGENT_UNSEEN, PIDFILE, detached, log_line
    from mam.util.proc import pid_alive

    sys.stdout.flush()  # the forked heartbeater must not write this process's buffered output again
    sys.stderr.flush()
    agent_pid = int(os.environ.get("MAM_AGENT_PID") or os.getppid())
    folder = os.path.join(root, STATE_DIR, "delegate_job_logs", job_id)

    def unseen(agent_start: int | None) -> bool:
        if agent_start is None and not pid_alive(agent_pid):  # as mam.jobs.heartbeat.run, before any import
            log_line(f"stopped: {AGENT_UNSEEN}")
            return True  # the pid file stays, for the wrapper outside to start another
        return False

    def body(agent_start: int | None) -> None:
        # The first beat at once, from the modules already loaded: importing the heartbeater's own takes a
        # while on a loaded machine, and the job's K x N deadline runs from `started`.
        state = os.path.join(root, STATE_DIR)
        record = _record(state, job_id)
        beaten_at = None
        if record is not None:
            try:  # counts once on disk with the wrapper woken (or for the runner); else the heartbeater beats again
                done = _emit(root, state, job_id, "heartbeat", {}, record, "heartbeater", publish=False)
                if done is not None and done[1] in ("wrapper", "runner"):
                    beaten_at = time.monotonic()
            except (OSError, sqlite3.Error):
                pass
        if record is not None and beaten_at is not None:
            # Most jobs end within their first interval: wait it out here, still without the heavy imports.
            try:
                pid, start = int(str(record.get("supervisor_pid") or 0)), int(str(record.get("supervisor_start") or 0))
                why = _first_interval(state, job_id, beaten_at + interval_s, agent_pid, agent_start, (pid, start))
            except Exception:
                why = ""  # the full heartbeater goes on from here (and says so if it fails too)
            if why:  # stopped early: the traces mam.jobs.heartbeat.beat_here leaves
                log_line(f"stopped: {why}")
                try:
                    os.unlink(os.path.join(folder, PIDFILE))
                except OSError:
                    pass
                os._exit(Exit.OK)
        from pathlib import Path

        from mam.jobs.heartbeat import beat_here
        from mam.workspace import Workspace

        beat_here(Workspace(Path(root)), job_id, interval_s, agent_pid, agent_start, beaten_at=beaten_at)

    detached(folder, agent_pid, body, log_name="heartbeat.log", done_at_once=unseen)


def _first_interval(
    state: str, job_id: str, until: float, agent_pid: int, agent_start: int | None, supervisor: tuple[int, int]
) -> str:
    """The heartbeater's first wait, without importing mam.jobs.heartbeat: until `until` (time.monotonic),
    the job's end or the death of the agent (or of the runner supervising a remote job). Returns why the
    heartbeater stops, as mam.jobs.heartbeat.run words it; '' when the interval passed (or this lean
    wait cannot be had: no pidfd, no FIFO, a registry it cannot read), for mam.jobs.heartbeat to go on.

    It sleeps in one poll on the processes' pidfds and a FIFO of mam.util.pokes listening to the job's
    key (every commit that changes the job's row pokes it); a poke costs one look at the job's row."""
    from mam.util.fdwait import readable
    from mam.util.pokefifo import Fifo, job_key
    from mam.util.proc import pid_alive

    pids = [(agent_pid, agent_start)] + ([(supervisor[0], supervisor[1] or None)] if supervisor[0] else [])
    fds: list[int] = []
    fifo: Fifo | None = None
    conn: sqlite3.Connection | None = None
    try:
        try:  # opened before the first look at the processes: a pid reused after it cannot be the one watched
            for pid, _start in pids:
                fds.append(os.pidfd_open(pid))
            fifo = Fifo(os.path.join(state, "run", "wake"), [job_key(job_id)])
            conn = sqlite3.connect(os.path.join(state, DB_FILE), timeout=BUSY_TIMEOUT_MS / 1000, isolation_level=None)
            if not _ready(conn):
                return ""
            conn.execute("PRAGMA query_only=ON")
        except (AttributeError, OSError, sqlite3.Error):
            return ""  # mam.jobs.heartbeat's own wait (Watch) knows what to do without them
        while True:  # listening before each look: a change after it pokes the FIFO, none is missed
            if not all(pid_alive(pid, start) for pid, start in pids):
                return "agent_gone"
            try:
                row = conn.execute("SELECT state, reason FROM jobs WHERE id=?", (job_id,)).fetchone()
            except sqlite3.Error:
                return ""
            if row is None:
                return ""
            if row[0] not in OPEN_STATES:  # worded as mam.jobs.emit's JobError
                return f"job_ended: job {job_id} already ended: {row[0]} ({row[1] or 'no reason'})"
            left = until - time.monotonic()
            if left <= 0:
                return ""
            ready = readable([fifo.fd, *fds], left)
            if any(fd in ready for fd in fds):
                return "agent_gone"
            if ready:
                fifo.drain()
    finally:
        if conn is not None:
            conn.close()
        if fifo is not None:
            fifo.close()
        for fd in fds:
            os.close(fd)
