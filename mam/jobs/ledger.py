"""The job ledger: registering a job and committing each of its transitions to the registry
row (compare-and-set on the owner), the 0600 live record and the audit log, in that order.

Inside `batch()` (a burst of events taken at once) the transitions are committed together when
the block ends: one registry write and one record write, then every audit line in order.
"""

from __future__ import annotations

import os
import secrets
import socket
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

from mam.errors import JobError
from mam.jobs import record as rec
from mam.jobs.model import Input, Job, input_to_dict, step
from mam.jobs.outcomes import TAKEN_OVER_EXIT, Ignored
from mam.store import jobs as jobs_table
from mam.store.registry import Registry
from mam.util.proc import start_time
from mam.workspace import Workspace


class TakenOver(JobError):
    """Raised when another attempt took the job record over while this one held it."""

    exit_code = TAKEN_OVER_EXIT


RECORD_EVERY_S = 0.25  # how stale the live record's counters (last_seq, last event) may get while the state stands


def new_job_id() -> str:
    return f"job-{uuid.uuid4().hex[:16]}"


def new_owner() -> str:
    """host:pid:start-time:random; enough to tell whether the owning process still lives."""
    pid = os.getpid()
    return f"{socket.gethostname()}:{pid}:{start_time(pid) or 0}:{uuid.uuid4().hex[:8]}"


def owner_alive(owner: str) -> bool:
    from mam.util.proc import pid_alive

    parts = owner.split(":")
    if len(parts) != 4 or parts[0] != socket.gethostname():
        return True  # another host's process: we cannot tell, so assume it lives
    try:
        pid, started = int(parts[1]), int(parts[2])
    except ValueError:
        return False
    return pid_alive(pid, started or None)


@dataclass
class Ledger:
    ws: Workspace
    registry: Registry
    job: Job
    owner: str
    meta: dict[str, Any] = field(default_factory=dict)  # target, kind, parent_job, topic_prefix, brief size...
    token: str = ""
    qid: int = 0
    on_commit: Callable[[Job, Input], None] | None = None
    _held: _Held | None = field(default=None, init=False, repr=False, compare=False)
    _record_state: str = field(default="", init=False, repr=False, compare=False)  # the state the record on disk shows
    _record_at: float = field(default=0.0, init=False, repr=False, compare=False)  # when it was written (monotonic)
    _record_dirty: bool = field(default=False, init=False, repr=False, compare=False)  # the job moved on since

    # -- registration -------------------------------------------------------------------------
    @classmethod
    def register(
        cls, ws: Workspace, registry: Registry, job: Job, *, owner: str, meta: dict[str, Any], token: str | None = None
    ) -> Ledger:
        token = token or secrets.token_hex(32)
        ledger = cls(ws, registry, job, owner, dict(meta), token)
        # Record (with the token) and the audit's first line exist before the row: an agent that sees the
        # row can always sign, and the audit log of any registered job replays from its creation.
        ledger._write_record()
        rec.audit(ws, job.id, "created", job=job.as_dict(), meta=meta, owner=owner)
        with registry.write() as conn:
            row = jobs_table.insert(
                conn,
                job_id=job.id,
                session=job.session,
                kind=meta.get("kind", "job"),
                target=meta.get("target", job.session),
                parent_job=meta.get("parent_job"),
                state=job.state.value,
                owner=owner,
                data=ledger._row_data(),
            )
        ledger.qid = row.qid
        return ledger

    @classmethod
    def take_over(cls, ws: Workspace, registry: Registry, job_id: str) -> Ledger:
        """Become the owner of an existing job (a retried wrapper); the previous owner stops touching it."""
        from mam.jobs.audit_log import repair

        data = rec.read_record(ws, job_id)
        repair(ws, registry, job_id)  # a previous owner may have died between its commit and its audit line
        owner = new_owner()
        with registry.write() as conn:
            row = jobs_table.get(conn, job_id)
            jobs_table.update(conn, job_id, owner=owner)
        job = Job.from_dict(row.data.get("job") or data)
        ledger = cls(ws, registry, job, owner, dict(row.data.get("meta", {})), str(data.get("token", "")), row.qid)
        rec.audit(ws, job_id, "taken_over", previous_owner=row.owner, owner=owner)
        ledger._write_record()
        return ledger

    # -- transitions --------------------------------------------------------------------------
    def apply(self, inp: Input) -> str:
        """Apply an input; commit if it changed the job. Returns why it was ignored ('' if applied)."""
        new, why = step(self.job, inp)
        if new == self.job:
            return why or Ignored.NO_CHANGE
        self.commit(new, inp)
        return ""

    def commit(self, new: Job, inp: Input) -> None:
        held = self._held if self._held is not None else _Held(self.job)
        held.steps.append((new, inp))
        held.lines.append(
            (
                "input",
                {
                    "input": input_to_dict(inp),
                    "state": new.state.value,
                    "reason": new.reason,
                    "exit_code": new.exit_code,
                },
            )
        )
        self.job = new
        if self._held is None:
            self._commit(held)

    def note(self, kind: str, **fields: Any) -> None:
        """Append a line to the audit log, after the inputs a `batch()` still holds."""
        if self._held is not None:
            self._held.lines.append((kind, fields))
        else:
            rec.audit(self.ws, self.job.id, kind, **fields)

    @contextmanager
    def batch(self) -> Iterator[None]:
        """Hold commits back until the block ends, then commit once (also if the block raises).

        Meanwhile `job` runs ahead in memory. A burst of events then costs one registry write and
        one record write instead of one each; the audit log gets the same lines in the same order.
        """
        if self._held is not None:  # nested: the outer block commits
            yield
            return
        self._held = _Held(self.job)
        try:
            yield
        finally:
            held, self._held = self._held, None
            self._commit(held)

    def _commit(self, held: _Held) -> None:
        if not held.steps:
            self._write_lines(held, inputs=False)
            return
        new = held.steps[-1][0]
        with self.registry.write() as conn:
            ok = jobs_table.update(
                conn,
                new.id,
                expected_owner=self.owner,
                expected_state=held.base.state.value,
                state=new.state.value,
                reason=new.reason,
                exit_code=new.exit_code,
                data=self._row_data(new),
                ended_at=(new.ended_ms / 1000 if new.ended_ms else None),
            )
            row = None if ok else jobs_table.get(conn, new.id)
            if ok:  # the transition lines commit with the state they produce (the file is repaired from them)
                numbered = iter(
                    jobs_table.add_inputs(conn, new.id, [fields for kind, fields in held.lines if kind == "input"])
                )
                held.lines = [(kind, next(numbered) if kind == "input" else fields) for kind, fields in held.lines]
        if row is not None:
            self.job = held.base
            self._write_lines(held, inputs=False)  # what was seen stays noted; the inputs were not applied
            if row.owner != self.owner:
                self._record_dirty = False  # the record is the new owner's now
                raise TakenOver(
                    f"job {new.id} was taken over by another attempt; this one leaves it unchanged", job_id=new.id
                )
            # Someone else ended it (`mam job cancel`, the monitor): adopt their outcome.
            self.job = Job.from_dict(row.data.get("job", {}))
            self._write_record()
            return
        self._mirror()
        self._write_lines(held, inputs=True)
        if self.on_commit is not None:
            for job, inp in held.steps:
                self.on_commit(job, inp)

    def _write_lines(self, held: _Held, *, inputs: bool) -> None:
        rec.audit_many(
            self.ws, self.job.id, [(kind, fields) for kind, fields in held.lines if inputs or kind != "input"]
        )

    def still_owner(self) -> bool:
        row = self.registry.find_job(self.job.id)
        return row is not None and row.owner == self.owner

    def sync(self) -> None:
        """Adopt an outcome written by someone else (cancel, monitor); raise TakenOver if the owner changed."""
        row = self.registry.job(self.job.id)
        if row.owner != self.owner:
            self._record_dirty = False  # the record is the new owner's now
            raise TakenOver(
                f"job {self.job.id} was taken over by another attempt; this one leaves it unchanged", job_id=self.job.id
            )
        if row.state != self.job.state.value:
            self.job = Job.from_dict(row.data.get("job", {}))
            self._write_record()
        else:
            self.refresh_record()

    def refresh_record(self, *, now: bool = False) -> None:
        """Write the live record if the job moved on since it was written, RECORD_EVERY_S ago (or `now`)."""
        if self._record_dirty and (now or time.monotonic() - self._record_at >= RECORD_EVERY_S):
            self._write_record()

    # -- files --------------------------------------------------------------------------------
    def _row_data(self, job: Job | None = None) -> dict[str, Any]:
        return {"job": (job or self.job).as_dict(), "meta": self.meta}

    def record(self) -> dict[str, Any]:
        return {**self.job.as_dict(), **self.meta, "owner": self.owner, "token": self.token}

    def _mirror(self) -> None:
        """Rewrite the live record after a commit: at once when the state changed, else at most every
        RECORD_EVERY_S (a burst of progress events or heartbeats would otherwise pay an atomic file
        rewrite each; the registry row, committed first, is the truth and nobody reads the record's
        counters to decide anything)."""
        if self.job.state.value != self._record_state or time.monotonic() - self._record_at >= RECORD_EVERY_S:
            self._write_record()
        else:
            self._record_dirty = True

    def _write_record(self) -> None:
        rec.write_record(self.ws, self.job.id, self.record())
        self._record_state, self._record_at, self._record_dirty = self.job.state.value, time.monotonic(), False


@dataclass
class _Held:
    """Transitions applied in memory but not committed yet, and the audit lines that follow them."""

    base: Job  # the job as last committed
    steps: list[tuple[Job, Input]] = field(default_factory=list)
    lines: list[tuple[str, dict[str, Any]]] = field(default_factory=list)
