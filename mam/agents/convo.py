"""Helpers shared by the adapters that read an agent CLI's own conversation store.

Owns: finding a CLI's folders from the environment recorded for a session (never
`os.environ`), the claude-style cwd slug, reading the first JSON line of a transcript,
opening a CLI's SQLite store briefly without creating it, and deleting a list of paths.
Must not know any one CLI's layout: that belongs to its adapter module.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import sqlite3
import subprocess
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from datetime import datetime
from pathlib import Path
from typing import Any

from mam.errors import AgentError
from mam.util.proc import find_program

# Store timestamps are taken by the agent a moment after mam notes `since`, sometimes rounded
# to the second; this much slack still keeps conversations of earlier sessions out.
TOLERANCE_S = 2.0
_SAFE_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,127}$")


def home(env: Mapping[str, str]) -> Path:
    return Path(env.get("HOME") or os.path.expanduser("~"))


def env_dir(env: Mapping[str, str], key: str, default: Path) -> Path:
    """The folder named by `key` in `env` when it is set, else `default`."""
    value = env.get(key)
    return Path(value).expanduser() if value else default


def xdg_data_home(env: Mapping[str, str]) -> Path:
    return env_dir(env, "XDG_DATA_HOME", home(env) / ".local" / "share")


def claude_slug(cwd: str) -> str:
    """Claude Code's project folder name: every character outside [A-Za-z0-9-] becomes '-'."""
    return re.sub(r"[^A-Za-z0-9-]", "-", cwd)


def check_id(agent: str, conversation_id: str) -> str:
    """Refuse an id that could name a path outside the store (it is joined into paths)."""
    if not _SAFE_ID.match(conversation_id or "") or ".." in conversation_id:
        raise AgentError(f"{agent}: {conversation_id!r} is not a conversation id", conversation_id=conversation_id)
    return conversation_id


def same_dir(a: str, b: str) -> bool:
    return a == b or os.path.realpath(a) == os.path.realpath(b)


def first_json_line(path: Path, limit: int = 1 << 20) -> dict[str, Any] | None:
    """The first line of a JSONL file as a dict (None if missing, empty or not JSON)."""
    try:
        with open(path, encoding="utf-8") as f:
            line = f.readline(limit)
    except OSError:
        return None
    try:
        value = json.loads(line)
    except ValueError:
        return None
    return value if isinstance(value, dict) else None


def iso_epoch(text: object) -> float | None:
    """Seconds since the epoch from an ISO-8601 timestamp ('Z' accepted), or None."""
    if not isinstance(text, str) or not text:
        return None
    try:
        return datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp()
    except ValueError:
        return None


def turn_began(cursor: dict[str, object], at: float | None = None) -> float:
    """For a CLI whose store records a turn's start in order (hermes' user message, grok's `turn_started`): with
    `at`, note that a turn began then; without, when the last turn noted began (0.0: none yet). What a turn end's
    `Noted.begun` is (mam.hooks.store_watch)."""
    if at is not None:
        cursor["turn_began"] = at
    began = cursor.get("turn_began", 0.0)
    return began if isinstance(began, float) else 0.0


def mtime(path: Path) -> float:
    try:
        return path.stat().st_mtime
    except OSError:
        return 0.0


@contextmanager
def sqlite_store(path: Path) -> Iterator[sqlite3.Connection | None]:
    """A short connection to an existing SQLite store (None if there is none).

    mode=rw never creates the file, and closing the last connection removes the -wal/-shm
    files it made, so looking leaves nothing behind in the agent's folder.
    """
    if not path.is_file():
        yield None
        return
    try:
        conn = sqlite3.connect(f"file:{path}?mode=rw", uri=True, timeout=5.0)
    except sqlite3.Error as e:
        raise AgentError(f"cannot open {path}: {e}") from e
    conn.row_factory = sqlite3.Row
    try:
        yield conn
    except sqlite3.Error as e:
        raise AgentError(f"cannot read {path}: {e}") from e
    finally:
        conn.close()


def columns(conn: sqlite3.Connection, table: str) -> set[str]:
    """The column names of `table` (empty if it does not exist): stores change between versions."""
    return {row[1] for row in conn.execute(f'PRAGMA table_info("{table}")')}


def has_row(conn: sqlite3.Connection | None, table: str, row_id: str) -> bool:
    """True if `table` exists and has a row with that id."""
    if conn is None or "id" not in columns(conn, table):
        return False
    return conn.execute(f'SELECT 1 FROM "{table}" WHERE id = ?', (row_id,)).fetchone() is not None


def delete_sessions(
    conn: sqlite3.Connection, ids: list[str], *, table: str, keys: Mapping[str, str] | None = None
) -> int:
    """In one write transaction, delete the `table` rows of `ids` and every plain-table row whose
    session_id is one of them (virtual tables are left to the store's own triggers). `keys` names
    other key columns per table (e.g. {"event": "aggregate_id"})."""
    return delete_keyed(conn, ids, {"*": "session_id", **(keys or {}), table: "id"})


def delete_keyed(conn: sqlite3.Connection, ids: list[str], keys: Mapping[str, str]) -> int:
    """In one write transaction, delete from every plain table the rows whose key column (keys[table],
    else keys["*"]) is one of `ids`. secure_delete overwrites what is deleted, and the WAL is
    checkpointed afterwards when nobody holds it, so the text does not linger in the files."""
    marks = ",".join("?" * len(ids))
    plain = [
        r[0]
        for r in conn.execute(
            "SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%' AND sql NOT LIKE "
            "'CREATE VIRTUAL%'"
        )
    ]
    conn.isolation_level = None
    conn.execute("PRAGMA secure_delete = ON")
    conn.execute("BEGIN IMMEDIATE")
    try:
        count = 0
        for name in plain:
            key = keys.get(name, keys.get("*", ""))
            if key and key in columns(conn, name):
                count += conn.execute(f'DELETE FROM "{name}" WHERE "{key}" IN ({marks})', ids).rowcount
        conn.execute("COMMIT")
    except BaseException:
        conn.execute("ROLLBACK")
        raise
    if count:
        try:
            conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        except sqlite3.Error:
            pass  # the CLI is using the store: its next checkpoint does it
    return count


def delete_rows(db: Path, ids: list[str], *, keys: Mapping[str, str]) -> bool:
    """delete_keyed on an existing SQLite file (nothing if it does not exist); True if any row went."""
    with sqlite_store(db) as conn:
        if conn is None:
            return False
        try:
            return delete_keyed(conn, ids, keys) > 0
        except sqlite3.Error as e:
            raise AgentError(f"could not delete {', '.join(ids)} from {db}: {e}") from e


def write_private(path: Path, text: str, *, mode: int = 0o600) -> None:
    """Replace a file atomically (a temp file beside it, then rename), with `mode`."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.mam-{os.getpid()}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, mode)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(text)
        os.chmod(tmp, mode)
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


def drop_json_lines(path: Path, key: str, value: str) -> bool:
    """Rewrite a JSONL file without the records whose `key` is `value`; True if any went.
    Lines that are not JSON objects are kept as they are."""
    try:
        lines = path.read_text(encoding="utf-8").splitlines(keepends=True)
    except FileNotFoundError:
        return False
    except OSError as e:
        raise AgentError(f"cannot read {path}: {e}") from e

    def mine(line: str) -> bool:
        try:
            record = json.loads(line)
        except ValueError:
            return False
        return isinstance(record, dict) and record.get(key) == value

    kept = [line for line in lines if not mine(line)]
    if len(kept) == len(lines):
        return False
    write_private(path, "".join(kept), mode=path.stat().st_mode & 0o777)
    return True


def run_cli(command: str, args: list[str], *, cwd: str, env: Mapping[str, str], timeout: float = 60.0) -> bool:
    """Run an agent CLI non-interactively with exactly `env` (never through a shell); True on exit 0.
    The program is looked up on env's PATH; a missing program, a failure or a timeout give False."""

    program = find_program(command, env.get("PATH", ""))  # never from a relative PATH entry (a working folder)
    if program is None:
        return False
    folder = cwd if os.path.isdir(cwd) else str(home(env))
    try:
        done = subprocess.run(
            [program, *args],
            cwd=folder,
            env=dict(env),
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            timeout=timeout,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired):
        return False
    return done.returncode == 0


def remove(paths: list[Path]) -> list[Path]:
    """Delete each existing file or folder; return what was deleted."""
    removed = []
    for path in paths:
        if path.is_dir() and not path.is_symlink():
            shutil.rmtree(path)
        elif path.exists() or path.is_symlink():
            path.unlink()
        else:
            continue
        removed.append(path)
    return removed
