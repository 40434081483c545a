"""The job store's one commit, and the two files exported from it.

SQLite is the only truth about a job. `commit(registry, transition)` writes, in one transaction, the
job's row (a new one, or a compare-and-set on owner and state) and the transition's audit lines as
numbered rows of `job_audit`. Then `export` brings the files under `.mam/` in step with it:

- `delegate_job_logs/<id>/audit.jsonl` gets every audit row numbered after the last line the file
  holds, under a lock. A process killed between its commit and its export leaves rows the next
  export of that job (by anyone: the next commit, a retry taking the job over, the monitor) appends
  once; nothing else writes the file.
- `jobs/<id>.json` (0600: it holds the job token, which is never stored in SQLite) is rewritten when
  the state or the owner changed. It has no counters (`last_seq`, the last event's time): those are
  in the registry. A new job's record is written before its row, so whoever sees the row can sign.
"""

from __future__ import annotations

import fcntl
import json
import os
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from mam.errors import UsageError
from mam.store import idempotency
from mam.store import jobs as jobs_table
from mam.store.common import AUDIT as AUDIT
from mam.store.common import now_ms as now_ms
from mam.store.jobs import JobRow
from mam.store.registry import Registry
from mam.util import pokes
from mam.util.fs import atomic_write_json
from mam.workspace import Workspace

ATTACHED = "attached"  # the audit kind of one delegation that attached to a job by its idempotency key
SECRET_FIELDS = ("token", "dispatch_secret")
COUNTERS = ("last_seq", "last_event_ms")  # change without the state: in the registry, not in the record
TAIL = 8192

Line = tuple[str, Mapping[str, Any]]  # (kind, fields)


# The audit lines that say a row's change happened: dropped with the change when its compare-and-set fails.
CHANGE_LINES = frozenset({"input", "followed", "taken_over"})


@dataclass(frozen=True)
class Transition:
    """What one commit writes for one job: a new row (`insert`) or `changes` to it, and audit lines.

    With `expected_owner` / `expected_state`, the changes apply only if the row still has them; if
    not, the lines that say the change happened (CHANGE_LINES: the transitions, a new owner) are dropped and
    the other lines still written.
    """

    job_id: str
    lines: Sequence[Line] = ()
    changes: Mapping[str, Any] = field(default_factory=dict)
    expected_owner: str | None = None
    expected_state: str | None = None
    insert: Mapping[str, Any] | None = None  # jobs_table.insert's fields
    token: str = ""  # for the record; else the token already in it
    # With `insert`: the job's idempotency key and how long it lasts (mam.store.idempotency). If the key
    # still names another job, nothing is inserted: that job gets an `attached` audit line instead.
    idempotency_key: str = ""
    key_ttl_s: float = 0.0
    attach_fields: Mapping[str, Any] = field(default_factory=dict)  # what the `attached` line says
    # Attaching needs the same session, runner and brief (its sha256) as the job the key names: else
    # KeyConflict (exit 2) and nothing is written. Empty: no condition.
    attach_requires: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class Committed:
    ok: bool  # the changes applied
    row: JobRow | None  # the row as committed (read only when needed: a new row, a refused change, a new record)
    lines: list[tuple[int, str]]  # the audit lines written: (n, JSON line)
    attached: JobRow | None = None  # the job an idempotency key still named (nothing was inserted)


def commit(registry: Registry, t: Transition) -> Committed:
    """Write `t` in one transaction, then export the audit rows and (on a new state or owner) the record."""
    ws = registry.ws
    stamp = {"ts_ms": now_ms(), "pid": os.getpid()}
    if t.insert is not None:
        write_record(ws, t.job_id, record_from(dict(t.insert["data"]), str(t.insert["owner"])), t.token)
    try:
        return _commit(registry, t, stamp)
    except KeyConflict:
        ws.job_record(t.job_id).unlink(missing_ok=True)  # written above for a job that was not made
        raise


def _commit(registry: Registry, t: Transition, stamp: dict[str, Any]) -> Committed:
    ws = registry.ws
    row: JobRow | None = None
    with registry.write() as conn:
        holder = idempotency.claim(conn, t.idempotency_key, t.job_id, ttl_s=t.key_ttl_s) if t.idempotency_key else None
        if holder is not None:
            _check_attach(t, holder)  # raises inside the transaction: it rolls back
            line = {
                **stamp,
                **_public(t.attach_fields),
                "idempotency_key": t.idempotency_key,
                "job_state": holder.state,  # open (single-flight) or ended (a recent result)
                "kind": ATTACHED,
            }
            numbered = jobs_table.add_audit(conn, holder.id, [line])
        elif t.insert is not None:
            row, ok, new_record = jobs_table.insert(conn, **t.insert), True, False
        elif t.changes:
            ok = jobs_table.update(
                conn, t.job_id, expected_owner=t.expected_owner, expected_state=t.expected_state, **t.changes
            )
            new_record = ok and (
                "owner" in t.changes or ("state" in t.changes and t.changes["state"] != t.expected_state)
            )
            if not ok or new_record:
                row = jobs_table.get(conn, t.job_id)
        else:
            ok, new_record = True, False
        if holder is None:
            kept = [(kind, fields) for kind, fields in t.lines if ok or kind not in CHANGE_LINES]
            lines = [{**stamp, **_public(fields), "kind": kind} for kind, fields in kept]
            numbered = jobs_table.add_audit(conn, t.job_id, lines)
    if holder is not None:  # no job of that id: its record, written above, goes
        ws.job_record(t.job_id).unlink(missing_ok=True)
        export_audit(registry, holder.id, numbered)
        return Committed(False, holder, numbered, attached=holder)
    if new_record and row is not None:
        write_record(ws, t.job_id, record_from(row.data, row.owner), t.token)
    export_audit(registry, t.job_id, numbered)
    if ok and t.changes:
        _poke(ws, t.job_id, row if new_record else None)
    return Committed(ok, row, numbered)


class KeyConflict(UsageError):
    """An idempotency key names a job for another session or another brief: never attach to it."""


def _check_attach(t: Transition, holder: JobRow) -> None:
    want = t.attach_requires
    if not want:
        return
    meta = holder.data.get("meta", {}) if isinstance(holder.data, dict) else {}
    differs = []
    if want.get("session") != holder.session or (want.get("runner") or None) != (meta.get("runner") or None):
        differs.append(f"it was made for target {holder.target!r}, not {want.get('target')!r}")
    if want.get("brief_sha256") != meta.get("brief_sha256"):
        differs.append("the brief differs")
    if differs:
        raise KeyConflict(
            f"idempotency key {t.idempotency_key!r} names job {holder.id} of session {holder.session!r} "
            f"({holder.state}): {' and '.join(differs)}; nothing was made: use another key",
            job_id=holder.id,
        )


def _poke(ws: Workspace, job_id: str, row: JobRow | None) -> None:
    """Wake whoever waits on this change (mam.util.pokes): the job's wrapper; on a new state or owner,
    the session's next job, the parent's loop and, once it ended, whoever waits for a free slot."""
    keys = [pokes.job_key(job_id)]
    if row is not None:
        keys.append(pokes.session_key(row.session))
        if row.parent_job:
            keys.append(pokes.parent_key(row.parent_job))
        if not row.open:
            keys += [pokes.ENDED, pokes.job_ended_key(job_id)]
    pokes.poke(ws, keys)


def note(registry: Registry, job_id: str, kind: str, **fields: Any) -> None:
    """One audit line that changes nothing (an injection, a nudge, a wait, a follower)."""
    commit(registry, Transition(job_id, lines=[(kind, fields)]))


def export(registry: Registry, job_id: str) -> int:
    """Bring both files of a job in step with the registry (after a crash); return how many audit lines it appended."""
    row = registry.find_job(job_id)
    if row is None:
        return 0
    try:
        with open(registry.ws.job_record(job_id), encoding="utf-8") as f:
            shown = json.load(f)
    except (OSError, ValueError):
        shown = None
    if isinstance(shown, dict) and (shown.get("state"), shown.get("owner")) != (row.state, row.owner):
        write_record(registry.ws, job_id, record_from(row.data, row.owner), "")
    return export_audit(registry, job_id, [])


# -- the live record ------------------------------------------------------------------------------
def record_from(data: Mapping[str, Any], owner: str) -> dict[str, Any]:
    """The record of a job row's data: the job without its counters, its meta, its owner."""
    job = {k: v for k, v in dict(data.get("job") or {}).items() if k not in COUNTERS}
    return {**job, **dict(data.get("meta") or {}), "owner": owner}


def write_record(ws: Workspace, job_id: str, record: Mapping[str, Any], token: str) -> None:
    """Replace the record atomically, readable by the owner only, keeping the token it holds unless given one.
    Without a token to write (the record is gone) nothing is written: a record without one is useless."""
    path = ws.job_record(job_id)
    if not token:
        try:
            with open(path, encoding="utf-8") as f:
                token = str(json.load(f).get("token") or "")
        except (OSError, ValueError, AttributeError):
            return
        if not token:
            return
    atomic_write_json(path, {**record, "token": token}, mode=0o600, fsync=False)  # (a jobs folder it makes is 0700)


# -- the audit file -------------------------------------------------------------------------------
_exported: dict[Path, tuple[int, int]] = {}  # audit file -> (its size, its last n) as this process left it


def export_audit(registry: Registry, job_id: str, fresh: list[tuple[int, str]]) -> int:
    """Append the job's audit rows numbered after the file's last line; return how many.

    `fresh`: rows this process just committed, appended as they are when they follow the file's last
    line (the common case: no read of the registry)."""
    folder = registry.ws.job_log_dir(job_id)
    if not folder.is_dir():
        folder.mkdir(mode=0o700, parents=True, exist_ok=True)
    path = folder / AUDIT
    fd = os.open(path, os.O_RDWR | os.O_APPEND | os.O_CREAT, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        size = os.fstat(fd).st_size
        known = _exported.get(path)
        if known is not None and known[0] == size:
            last = known[1]
        else:
            size, last = _last_n(fd, size)
        if fresh and fresh[0][0] == last + 1:
            rows = fresh
        elif fresh and fresh[-1][0] <= last:
            rows = []
        else:
            with registry.read() as conn:
                rows = jobs_table.audit_after(conn, job_id, last)
        if rows:
            data = ("\n".join(text for _n, text in rows) + "\n").encode("utf-8")
            os.write(fd, data)
            size += len(data)
            last = rows[-1][0]
        _exported[path] = (size, last)
        return len(rows)
    finally:
        os.close(fd)  # releases the lock


def _lines_backwards(fd: int, size: int) -> Iterator[bytes]:
    """The file's lines up to `size`, last first, read in blocks from the end."""
    end, carry = size, b""
    while end > 0:
        start = max(0, end - TAIL)
        pieces = (os.pread(fd, end - start, start) + carry).split(b"\n")
        carry = pieces.pop(0) if start > 0 else b""
        yield from reversed(pieces)
        end = start


def _after_last_newline(fd: int, size: int) -> int:
    end = size
    while end > 0:
        start = max(0, end - TAIL)
        at = os.pread(fd, end - start, start).rfind(b"\n")
        if at >= 0:
            return start + at + 1
        end = start
    return 0


def _last_n(fd: int, size: int) -> tuple[int, int]:
    """(size, n of the last numbered line; 0 if none). A torn last line (a writer killed mid-write) is cut off first."""
    if size and os.pread(fd, 1, size - 1) != b"\n":
        size = _after_last_newline(fd, size)
        os.ftruncate(fd, size)
    for raw in _lines_backwards(fd, size):
        try:
            n = json.loads(raw).get("n") if raw else None
        except (ValueError, AttributeError):
            continue
        if isinstance(n, int):
            return size, n
    return size, 0


def _public(fields: Mapping[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in fields.items() if k not in SECRET_FIELDS}
