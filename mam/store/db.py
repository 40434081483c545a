"""SQLite connection, schema migrations and write transactions (huey style).

Every write runs in `BEGIN IMMEDIATE`, so writers are serialized by SQLite itself and a
writer killed mid-transaction leaves nothing half-done. WAL on local disks, DELETE
journal on network filesystems (where WAL's shared memory is unsafe).
"""

from __future__ import annotations

import errno
import logging
import os
import secrets
import sqlite3
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from mam.errors import RegistryDamaged, StoreError
from mam.store import write_queue

log = logging.getLogger(__name__)

# Under heavy load (hundreds of agent processes on two cores) a writer may wait long for its turn:
# waiting is better than failing a job, so the limit is generous.
BUSY_TIMEOUT_MS = 120_000
NETWORK_FS = {"nfs", "nfs4", "cifs", "smb3", "smbfs", "fuse.sshfs", "sshfs", "9p", "afs", "fuse.glusterfs", "ceph"}

# One entry per schema version; never edit an entry once released, append a new one.
MIGRATIONS: list[list[str]] = [
    [
        """CREATE TABLE sessions (
            name TEXT PRIMARY KEY,
            agent TEXT NOT NULL,
            role TEXT NOT NULL,
            backend TEXT NOT NULL,
            server TEXT NOT NULL,
            pane_id TEXT,
            pane_pid INTEGER,
            cwd TEXT NOT NULL,
            conversation_id TEXT,
            status TEXT NOT NULL,
            resumable INTEGER NOT NULL DEFAULT 0,
            agent_env TEXT NOT NULL DEFAULT '{}',
            note TEXT NOT NULL DEFAULT '',
            launched_at REAL,
            created_at REAL NOT NULL,
            updated_at REAL NOT NULL
        )""",
        """CREATE TABLE orchestrators (
            key TEXT PRIMARY KEY,
            backend TEXT NOT NULL,
            server TEXT NOT NULL,
            pane_id TEXT NOT NULL,
            session TEXT NOT NULL DEFAULT '',
            pid INTEGER,
            recorded_at REAL NOT NULL
        )""",
        """CREATE TABLE jobs (
            qid INTEGER PRIMARY KEY AUTOINCREMENT,
            id TEXT NOT NULL UNIQUE,
            session TEXT NOT NULL,
            kind TEXT NOT NULL DEFAULT 'job',
            target TEXT NOT NULL,
            parent_job TEXT,
            state TEXT NOT NULL,
            reason TEXT NOT NULL DEFAULT '',
            exit_code INTEGER,
            owner TEXT NOT NULL DEFAULT '',
            data TEXT NOT NULL DEFAULT '{}',
            created_at REAL NOT NULL,
            updated_at REAL NOT NULL,
            ended_at REAL
        )""",
        "CREATE INDEX jobs_by_session_state ON jobs(session, state)",
        "CREATE INDEX jobs_by_parent ON jobs(parent_job)",
        """CREATE TABLE events (
            job_id TEXT NOT NULL,
            seq INTEGER NOT NULL,
            type TEXT NOT NULL,
            sender TEXT NOT NULL,
            ts REAL NOT NULL,
            raw TEXT NOT NULL,
            recorded_at REAL NOT NULL,
            published INTEGER NOT NULL DEFAULT 0,
            PRIMARY KEY (job_id, seq)
        ) WITHOUT ROWID""",
        "CREATE TABLE seqs (job_id TEXT PRIMARY KEY, last INTEGER NOT NULL) WITHOUT ROWID",
        "CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL) WITHOUT ROWID",
        "INSERT INTO meta(key, value) VALUES ('sessions_gen', '0')",
    ],
    [
        # Each job transition's audit line, committed with the state it produced (moved to job_audit by
        # migration 5).
        """CREATE TABLE job_inputs (
            job_id TEXT NOT NULL,
            n INTEGER NOT NULL,
            line TEXT NOT NULL,
            PRIMARY KEY (job_id, n)
        ) WITHOUT ROWID""",
        # The runner's relay looks for unpublished events on every poll: never scan the whole table.
        "CREATE INDEX events_unpublished ON events(published) WHERE published = 0",
    ],
    [
        # When the agent of the current launch first showed it was ready for a paste.
        "ALTER TABLE sessions ADD COLUMN ready_at REAL",
    ],
    [
        # --permissions of the session (ask, report, full); sessions made before it passed nothing: ask.
        "ALTER TABLE sessions ADD COLUMN permissions TEXT NOT NULL DEFAULT 'ask'",
    ],
    [
        # Every audit line of a job (its creation, each transition, each event received or rejected, each
        # note), numbered per job and committed with the state it goes with: the only truth, of which
        # `.mam/delegate_job_logs/<id>/audit.jsonl` is an export (see mam/store/journal.py). The transition
        # lines stored so far move here with their numbers.
        """CREATE TABLE job_audit (
            job_id TEXT NOT NULL,
            n INTEGER NOT NULL,
            kind TEXT NOT NULL,
            line TEXT NOT NULL,
            PRIMARY KEY (job_id, n)
        ) WITHOUT ROWID""",
        "INSERT INTO job_audit(job_id, n, kind, line) SELECT job_id, n, 'input', json_set(line, '$.kind', 'input')"
        " FROM job_inputs",
        "DROP TABLE job_inputs",
    ],
    [
        # The governor (mam/governor): each job's hold on a running slot and its token reservation, made
        # in one transaction with the check that it fits; `held` while the job may spend, then
        # `committed` (its measured usage) or `released` (nothing spent). A held row counts as a
        # running slot only while its job is open, so a dead wrapper's slot frees when its job ends.
        """CREATE TABLE reservations (
            job_id TEXT PRIMARY KEY,
            qid INTEGER NOT NULL,
            session TEXT NOT NULL,
            role TEXT NOT NULL DEFAULT '',
            reserved INTEGER NOT NULL,
            status TEXT NOT NULL,
            committed INTEGER NOT NULL DEFAULT 0,
            source TEXT NOT NULL DEFAULT '',
            reserved_at REAL NOT NULL,
            settled_at REAL,
            day TEXT NOT NULL DEFAULT ''
        ) WITHOUT ROWID""",
        "CREATE INDEX reservations_by_status ON reservations(status)",
        # Once-only marks of the governor (e.g. the 80 % warning of one cap).
        "CREATE TABLE governor_marks (key TEXT PRIMARY KEY, at REAL NOT NULL) WITHOUT ROWID",
        # `mam session create --token-budget N` (0: none).
        "ALTER TABLE sessions ADD COLUMN token_budget INTEGER NOT NULL DEFAULT 0",
    ],
    [
        # Idempotency keys of `mam job delegate --idempotency-key K` / `--dedup` (mam/store/idempotency.py):
        # the job each key names and when the key was claimed (it expires MAM_IDEMPOTENCY_TTL_S later).
        """CREATE TABLE idempotency_keys (
            key TEXT PRIMARY KEY,
            job_id TEXT NOT NULL,
            created_at REAL NOT NULL
        ) WITHOUT ROWID""",
    ],
    [
        # `mam session create --worktree`: the session's own git worktree, its branch, the base it was made
        # from (as given and as a commit), and the host it runs on ('' for sessions made before).
        "ALTER TABLE sessions ADD COLUMN worktree TEXT NOT NULL DEFAULT ''",
        "ALTER TABLE sessions ADD COLUMN branch TEXT NOT NULL DEFAULT ''",
        "ALTER TABLE sessions ADD COLUMN base TEXT NOT NULL DEFAULT ''",
        "ALTER TABLE sessions ADD COLUMN base_commit TEXT NOT NULL DEFAULT ''",
        "ALTER TABLE sessions ADD COLUMN host TEXT NOT NULL DEFAULT ''",
    ],
    [
        # The workspace's blackboard (mam/board): one row per key, its version raised by every write; a
        # deleted key keeps its row (deleted = 1) so its version never goes back and a watcher can tell
        # an old message from a new one.
        """CREATE TABLE board (
            key TEXT PRIMARY KEY,
            value TEXT NOT NULL,
            version INTEGER NOT NULL,
            writer TEXT NOT NULL,
            ts INTEGER NOT NULL,
            deleted INTEGER NOT NULL DEFAULT 0
        ) WITHOUT ROWID""",
        # Every write of the board (set or delete), committed with it: who, when, what.
        """CREATE TABLE board_audit (
            n INTEGER PRIMARY KEY AUTOINCREMENT,
            key TEXT NOT NULL,
            op TEXT NOT NULL,
            value TEXT NOT NULL,
            version INTEGER NOT NULL,
            writer TEXT NOT NULL,
            ts INTEGER NOT NULL
        )""",
        # `mam session create --board`: the agent may run `mam board ...` without a prompt.
        "ALTER TABLE sessions ADD COLUMN board INTEGER NOT NULL DEFAULT 0",
    ],
    [
        # `mam session fork SRC --session NEW`: the session NEW was forked from ('' for one created afresh).
        "ALTER TABLE sessions ADD COLUMN forked_from TEXT NOT NULL DEFAULT ''",
    ],
    [
        # `mam routine add` (mam/routines): a job template and its schedule (`every`: spec is the period in
        # seconds from `anchor`; `cron`: the expression in zone `tz`; `webhook`: none); `next_at` is the next
        # tick not yet decided; `secret` signs its webhook deliveries ('' without --on-webhook).
        """CREATE TABLE routines (
            name TEXT PRIMARY KEY,
            target TEXT NOT NULL,
            brief TEXT NOT NULL,
            kind TEXT NOT NULL,
            spec TEXT NOT NULL DEFAULT '',
            tz TEXT NOT NULL DEFAULT 'UTC',
            anchor REAL NOT NULL,
            concurrency TEXT NOT NULL DEFAULT 'skip',
            catch_up TEXT NOT NULL DEFAULT 'skip',
            max_tokens INTEGER,
            timeout_s REAL,
            paused INTEGER NOT NULL DEFAULT 0,
            next_at REAL,
            secret TEXT NOT NULL DEFAULT '',
            created_at REAL NOT NULL,
            updated_at REAL NOT NULL
        ) WITHOUT ROWID""",
        # One receipt per tick (`mam routine log`): decided once (its key, the tick's idempotency key, is
        # unique), then `pending` -> `firing` (its job id fixed) -> `done` (the job's outcome), or `skipped`
        # with a reason (active, paused, hold, budget, missed).
        """CREATE TABLE routine_ticks (
            n INTEGER PRIMARY KEY AUTOINCREMENT,
            routine TEXT NOT NULL,
            key TEXT NOT NULL UNIQUE,
            trigger TEXT NOT NULL,
            scheduled REAL NOT NULL,
            status TEXT NOT NULL,
            reason TEXT NOT NULL DEFAULT '',
            detail TEXT NOT NULL DEFAULT '',
            text TEXT NOT NULL DEFAULT '',
            job_id TEXT NOT NULL DEFAULT '',
            outcome TEXT NOT NULL DEFAULT '',
            exit_code INTEGER,
            created_at REAL NOT NULL,
            fired_at REAL,
            ended_at REAL
        )""",
        "CREATE INDEX routine_ticks_by_routine ON routine_ticks(routine, n)",
        "CREATE INDEX routine_ticks_open ON routine_ticks(status) WHERE status IN ('pending', 'firing')",
        # Webhook delivery ids already taken (each fires once), and the refused attempts' count.
        """CREATE TABLE routine_deliveries (
            routine TEXT NOT NULL,
            delivery TEXT NOT NULL,
            at REAL NOT NULL,
            PRIMARY KEY (routine, delivery)
        ) WITHOUT ROWID""",
    ],
    [
        # A paused job's mode and who paused it (mam/store/pauses.py); the job's own row says it is paused. Kept
        # apart from the row so an escalation (safe -> quick -> hard) never races the job's own commits.
        """CREATE TABLE job_pauses (
            job_id TEXT PRIMARY KEY,
            mode TEXT NOT NULL,
            since_ms INTEGER NOT NULL,
            by TEXT NOT NULL
        ) WITHOUT ROWID""",
    ],
    [
        # The job's fencing epoch (mam.jobs.ledger): raised whenever another process takes the job over (a
        # take-over, a re-dispatch); a remote job's runner events carry it, and an older one is `stale_epoch`.
        "ALTER TABLE jobs ADD COLUMN epoch INTEGER NOT NULL DEFAULT 0",
    ],
    [
        # The job whose hard pause stopped the session's agent ('' for none): the session's next delegation
        # relaunches it with its conversation (mam.jobs.delivery.relaunch_after_pause), through any restart.
        "ALTER TABLE sessions ADD COLUMN stopped_by_pause TEXT NOT NULL DEFAULT ''",
    ],
    [
        # `mam session create`, `fork`, `resume`: the absolute path of the socket of the session's server when
        # its pane was made (tmux: `$TMUX_TMPDIR/tmux-UID/NAME` of the process that made it; herdr: its API
        # socket). Every later command reaches the server by it, whatever its own environment ('' : a row made
        # before this column, reached as before from the environment of the process that looks).
        "ALTER TABLE sessions ADD COLUMN socket TEXT NOT NULL DEFAULT ''",
    ],
    [
        # `mam role add` (mam/org): a role of the workspace's organisation, the session that plays it and whom it
        # reports to ('' : no one); its daily cap of task jobs (NULL: none of its own) and its circuit breaker
        # (`breaker` consecutive failed jobs trip it; `tripped_at` NULL while closed, until `mam role reset`).
        """CREATE TABLE roles (
            name TEXT PRIMARY KEY,
            session TEXT NOT NULL,
            reports_to TEXT NOT NULL DEFAULT '',
            daily_runs INTEGER,
            breaker INTEGER NOT NULL DEFAULT 3,
            failures INTEGER NOT NULL DEFAULT 0,
            tripped_at REAL,
            created_at REAL NOT NULL,
            updated_at REAL NOT NULL
        ) WITHOUT ROWID""",
        # `mam task add`: a piece of work that outlives one job (`state`: todo, running, blocked, in_review, done,
        # failed, cancelled); `wait` the task a blocked one waits on; `wake` the reason of its next wake (assigned,
        # blockers_resolved, reopened, unblocked); `note` what `mam task reopen --note` gave its next run.
        """CREATE TABLE tasks (
            n INTEGER PRIMARY KEY AUTOINCREMENT,
            id TEXT NOT NULL UNIQUE,
            title TEXT NOT NULL,
            role TEXT NOT NULL,
            brief TEXT NOT NULL DEFAULT '',
            parent TEXT NOT NULL DEFAULT '',
            state TEXT NOT NULL,
            wait TEXT NOT NULL DEFAULT '',
            wake TEXT NOT NULL DEFAULT '',
            note TEXT NOT NULL DEFAULT '',
            idempotency_key TEXT UNIQUE,
            created_at REAL NOT NULL,
            updated_at REAL NOT NULL,
            ended_at REAL
        )""",
        "CREATE INDEX tasks_by_state ON tasks(state)",
        "CREATE INDEX tasks_by_parent ON tasks(parent)",
        # `mam task add --blocked-by`: the task runs only once every blocker is done.
        """CREATE TABLE task_blockers (
            task TEXT NOT NULL,
            blocker TEXT NOT NULL,
            PRIMARY KEY (task, blocker)
        )""",
        # One row per wake of a task (its job, fixed before anything is delegated: a node killed mid-task
        # delegates the same job id again): `firing` while its job runs, then `done` with the job's outcome, the
        # agent's disposition and the state the task moved to. `day`: the local day it counts against the caps.
        """CREATE TABLE task_runs (
            n INTEGER PRIMARY KEY AUTOINCREMENT,
            task TEXT NOT NULL,
            job_id TEXT NOT NULL UNIQUE,
            role TEXT NOT NULL,
            session TEXT NOT NULL,
            reason TEXT NOT NULL,
            day TEXT NOT NULL,
            status TEXT NOT NULL,
            brief TEXT NOT NULL,
            outcome TEXT NOT NULL DEFAULT '',
            exit_code INTEGER,
            detail TEXT NOT NULL DEFAULT '',
            disposition TEXT NOT NULL DEFAULT '',
            waiting_on TEXT NOT NULL DEFAULT '',
            task_state TEXT NOT NULL DEFAULT '',
            created_at REAL NOT NULL,
            ended_at REAL
        )""",
        "CREATE INDEX task_runs_by_task ON task_runs(task, n)",
        "CREATE INDEX task_runs_by_day ON task_runs(day, role)",
        "CREATE INDEX task_runs_firing ON task_runs(status) WHERE status = 'firing'",
    ],
]
SCHEMA_VERSION = len(MIGRATIONS)
MOUNTS = Path("/proc/mounts")
_warned_network: set[str] = set()


def filesystem_type(path: Path, *, mounts: Path = MOUNTS) -> str:
    """The filesystem type of the mount holding `path`, from `mounts` (/proc/mounts; '' if unknown)."""
    try:
        with open(mounts, encoding="utf-8") as f:
            table = [line.split() for line in f]
    except OSError:
        return ""
    target = str(path.resolve())
    best, fstype = "", ""
    for parts in table:
        if len(parts) < 3:
            continue
        point = parts[1].replace("\\040", " ")
        if (target == point or target.startswith(point.rstrip("/") + "/")) and len(point) >= len(best):
            best, fstype = point, parts[2]
    return fstype


def journal_mode_for(path: Path, *, mounts: Path = MOUNTS) -> str:
    """WAL, or DELETE when `path` is on a network filesystem (warned once per path)."""
    fstype = filesystem_type(path, mounts=mounts)
    if fstype in NETWORK_FS:
        key = str(path)
        if key not in _warned_network:
            _warned_network.add(key)
            log.warning("%s is on a network filesystem (%s): using journal_mode=DELETE instead of WAL", path, fstype)
        return "DELETE"
    return "WAL"


def _busy(error: BaseException) -> bool:
    """True for SQLite's "database is locked / busy", also when wrapped in a StoreError."""
    cause = error.__cause__ if isinstance(error, StoreError) else error
    return isinstance(cause, sqlite3.OperationalError) and ("locked" in str(cause) or "busy" in str(cause))


DOCTOR_HINT = "`mam doctor` checks it and can rebuild the sessions from the YAML mirror"


def store_error(path: Path, error: sqlite3.Error, doing: str) -> StoreError:
    """A one-line StoreError for a failed SQLite call, in plain words (damaged, disk full, read-only)."""
    text = str(error)
    low = text.lower()
    if "malformed" in low or "not a database" in low or "corrupt" in low:
        return RegistryDamaged(f"registry {path} is damaged ({text}); {DOCTOR_HINT}", path=str(path))
    if "full" in low or _no_space(path.parent):  # a full disk can also surface as "disk I/O error"
        return StoreError(
            f"disk full: cannot {doing} registry {path} ({text}); free some space and retry", path=str(path)
        )
    if "readonly" in low or "read-only" in low or not os.access(path.parent, os.W_OK):
        return StoreError(f"cannot {doing} registry {path}: its folder is read-only ({text})", path=str(path))
    return StoreError(f"cannot {doing} registry {path}: {text}", path=str(path))


def _no_space(folder: Path) -> bool:
    try:
        return os.statvfs(folder).f_bavail == 0
    except OSError:
        return False


def _create(path: Path) -> None:
    """Create a registry that is complete before it has its name: a file at `path` is always a mam registry.

    So an empty or foreign file there is damage to report, never a new registry to initialise.
    """
    tmp = path.with_name(f".{path.name}.new-{os.getpid()}-{secrets.token_hex(4)}")
    try:
        conn = sqlite3.connect(str(tmp), isolation_level=None)
        try:
            conn.execute("PRAGMA journal_mode=DELETE")  # no -wal beside a file that is about to be renamed
            conn.execute("BEGIN IMMEDIATE")
            for statements in MIGRATIONS:
                for statement in statements:
                    conn.execute(statement)
            conn.execute(f"PRAGMA user_version={SCHEMA_VERSION}")
            conn.execute("COMMIT")
        finally:
            conn.close()
        os.chmod(tmp, 0o600)
        try:
            os.link(tmp, path)  # atomic, and never replaces a registry another process just created
        except FileExistsError:
            pass
        except OSError as e:
            if e.errno not in (errno.EPERM, errno.ENOTSUP, errno.EOPNOTSUPP, errno.EMLINK):
                raise
            if not os.path.lexists(path):  # a filesystem without hard links: a short race, no damage
                os.rename(tmp, path)
    except sqlite3.Error as e:
        raise store_error(path, e, "create") from e
    finally:
        tmp.unlink(missing_ok=True)
        Path(f"{tmp}-journal").unlink(missing_ok=True)


@contextmanager
def _queued(fd: int) -> Iterator[None]:
    write_queue.take(fd)
    try:
        yield
    finally:
        write_queue.give(fd)


class _Idle:
    """Connections a long-running process (the node) keeps after `Database.close`, per registry file, for
    the next `Database` of that file: opening one costs ~0.6 ms (the connection, its pragmas, the schema
    read), and the node opens several per job. Off unless `keep_idle` turned it on. A connection is taken
    again only for the same file (device and inode: a registry replaced meanwhile gets a new one) and
    only when it was left outside a transaction."""

    KEEP = 8  # per file: more than the threads that open one at once in the usual case

    def __init__(self) -> None:
        self.on = False
        self._lock = threading.Lock()
        self._conns: dict[str, list[tuple[tuple[int, int], sqlite3.Connection, int]]] = {}

    def take(self, path: Path) -> tuple[sqlite3.Connection, int, tuple[int, int]] | None:
        if not self.on:
            return None
        try:
            st = os.stat(path)
        except OSError:
            return None
        ident = (st.st_dev, st.st_ino)
        with self._lock:
            held = self._conns.get(str(path), [])
            while held:
                was, conn, fd = held.pop()
                if was == ident:
                    return conn, fd, ident
                _close(conn, fd)
        return None

    def give(self, path: Path, ident: tuple[int, int] | None, conn: sqlite3.Connection, fd: int) -> bool:
        """Keep `conn` (and its write-queue descriptor) for the next Database of `path`; False: close them."""
        if not self.on or ident is None or conn.in_transaction:
            return False
        with self._lock:
            held = self._conns.setdefault(str(path), [])
            if len(held) >= self.KEEP:
                return False
            held.append((ident, conn, fd))
        return True


def _close(conn: sqlite3.Connection, fd: int) -> None:
    conn.close()
    if fd >= 0:
        os.close(fd)


_IDLE = _Idle()
_CLOSED = sqlite3.connect(":memory:", check_same_thread=False)
_CLOSED.close()


def keep_idle(on: bool = True) -> None:
    """Keep closed connections for reuse in this process (the node, which lives long and opens many)."""
    _IDLE.on = on


class Database:
    """One SQLite connection, shared by the threads of one process under a lock."""

    def __init__(self, path: Path, *, journal_mode: str | None = None, mounts: Path = MOUNTS) -> None:
        self.path = path
        self._lock = threading.RLock()
        self._write_fd = -1
        self._ident: tuple[int, int] | None = None
        idle = _IDLE.take(path) if journal_mode is None else None
        if idle is not None:
            self.conn, self._write_fd, self._ident = idle
            return
        path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        mode = journal_mode or journal_mode_for(path.parent, mounts=mounts)
        if not os.path.lexists(path):
            _create(path)
        # While another process switches the file to WAL, SQLite can answer "locked" at once,
        # without its busy handler: that is a wait, not a failure, so try again for a while.
        deadline = time.monotonic() + BUSY_TIMEOUT_MS / 1000
        pause = 0.005
        while True:
            try:
                self.conn = self._open(mode)
                break
            except (sqlite3.Error, StoreError) as e:  # StoreError: the migration's transaction
                if not _busy(e) or time.monotonic() + pause > deadline:
                    if isinstance(e, StoreError):
                        raise
                    raise store_error(path, e, "open") from e
                time.sleep(pause)
                pause = min(pause * 2, 0.2)
        try:
            os.chmod(path, 0o600)
        except OSError:
            pass
        try:
            st = os.stat(path)
            self._ident = (st.st_dev, st.st_ino)
        except OSError:
            self._ident = None

    def _open(self, mode: str) -> sqlite3.Connection:
        try:
            size = os.stat(self.path).st_size
        except OSError as e:
            raise StoreError(f"cannot open registry {self.path}: {e.strerror}", path=str(self.path)) from e
        if size == 0:
            raise RegistryDamaged(
                f"registry {self.path} is empty (0 bytes): refusing to treat it as a new registry; {DOCTOR_HINT}",
                path=str(self.path),
            )
        conn = sqlite3.connect(
            str(self.path), timeout=BUSY_TIMEOUT_MS / 1000, isolation_level=None, check_same_thread=False
        )
        try:
            conn.row_factory = sqlite3.Row
            conn.execute(f"PRAGMA busy_timeout={BUSY_TIMEOUT_MS}")
            if conn.execute("PRAGMA user_version").fetchone()[0] == 0:
                raise RegistryDamaged(
                    f"{self.path} is not a mam registry (schema version 0): refusing to initialise it; {DOCTOR_HINT}",
                    path=str(self.path),
                )
            current = conn.execute("PRAGMA journal_mode").fetchone()[0]
            if current.upper() != mode:
                conn.execute(f"PRAGMA journal_mode={mode}")
            # WAL + NORMAL is durable against process crashes (kill -9); only power loss can drop the last commits.
            conn.execute("PRAGMA synchronous=NORMAL" if mode == "WAL" else "PRAGMA synchronous=FULL")
            conn.execute("PRAGMA foreign_keys=ON")
            self.conn = conn
            self._migrate()
        except BaseException:
            conn.close()
            raise
        return conn

    def _migrate(self) -> None:
        version = self.conn.execute("PRAGMA user_version").fetchone()[0]
        if version > SCHEMA_VERSION:
            raise StoreError(
                f"registry {self.path} has schema version {version}, newer than this mam ({SCHEMA_VERSION}); upgrade "
                "mam"
            )
        if version == SCHEMA_VERSION:
            return
        with self.transaction() as conn:
            version = conn.execute("PRAGMA user_version").fetchone()[0]  # another process may have migrated
            for number in range(version, SCHEMA_VERSION):
                for statement in MIGRATIONS[number]:
                    conn.execute(statement)
            conn.execute(f"PRAGMA user_version={SCHEMA_VERSION}")

    def _write_lock(self) -> int:
        """The descriptor of the writers' queue (mam.store.write_queue), opened once; -1 where it cannot be had."""
        if self._write_fd < 0:
            self._write_fd = write_queue.open_lock(str(self.path))
        return self._write_fd

    @contextmanager
    def transaction(self) -> Iterator[sqlite3.Connection]:
        """BEGIN IMMEDIATE ... COMMIT; any exception rolls back and propagates. Writers of all processes
        queue on one flock first (mam.store.write_queue)."""
        with self._lock, _queued(self._write_lock()):
            try:
                self.conn.execute("BEGIN IMMEDIATE")
            except sqlite3.Error as e:
                raise store_error(self.path, e, "write") from e
            try:
                yield self.conn
            except BaseException as e:
                self._rollback()
                if isinstance(e, sqlite3.DatabaseError) and not isinstance(e, sqlite3.IntegrityError):
                    raise store_error(self.path, e, "write") from e
                raise
            else:
                try:
                    self.conn.execute("COMMIT")
                except sqlite3.Error as e:
                    self._rollback()
                    raise store_error(self.path, e, "write") from e

    def _rollback(self) -> None:
        try:
            self.conn.execute("ROLLBACK")
        except sqlite3.Error as e:  # a full disk or a damaged file may refuse even this; the first error matters
            log.debug("rollback on %s failed: %s", self.path, e)

    @contextmanager
    def read(self) -> Iterator[sqlite3.Connection]:
        """A consistent read snapshot (a deferred transaction)."""
        with self._lock:
            try:
                self.conn.execute("BEGIN")
                yield self.conn
            except sqlite3.DatabaseError as e:
                if isinstance(e, sqlite3.IntegrityError):
                    raise
                raise store_error(self.path, e, "read") from e
            finally:
                try:
                    self.conn.execute("COMMIT")
                except sqlite3.Error as e:
                    log.debug("end of read on %s failed: %s", self.path, e)

    def integrity_check(self) -> str:
        with self._lock:
            return str(self.conn.execute("PRAGMA integrity_check").fetchone()[0])

    def close(self) -> None:
        with self._lock:
            if self.conn is _CLOSED:
                return
            if not _IDLE.give(self.path, self._ident, self.conn, self._write_fd):
                _close(self.conn, self._write_fd)
            self.conn, self._write_fd = _CLOSED, -1  # a use after close fails, as on a closed connection
