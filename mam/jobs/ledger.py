"""The job ledger: one attempt's hold on a job. It registers the job, applies inputs through the
pure model and commits each transition through the store's one commit (`mam.store.journal`):
the registry row (compare-and-set on the owner and the state) with its audit lines, in one
transaction; the record and the audit file are exported from there.

Inside `batch()` (a burst of events taken at once) the transitions are committed together when
the block ends: one transaction with every audit line in order.
"""

from __future__ import annotations

import os
import secrets
import socket
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

from mam.errors import JobError
from mam.jobs import record as rec
from mam.jobs.model import Input, Job, input_to_dict, step
from mam.outcomes import TAKEN_OVER_EXIT, Ignored
from mam.store import journal
from mam.store.jobs import JobRow
from mam.store.journal import Transition
from mam.store.registry import Registry
from mam.util import interrupts
from mam.util.proc import pid_alive, start_time
from mam.workspace import Workspace


class TakenOver(JobError):
    """Raised when another attempt took the job record over while this one held it."""

    exit_code = TAKEN_OVER_EXIT


def new_job_id() -> str:
    return f"job-{uuid.uuid4().hex[:16]}"


def new_owner(pid: int | None = None) -> str:
    """host:pid:start-time:random of this process (or of `pid`); enough to tell whether it still lives."""
    pid = os.getpid() if pid is None else pid
    return f"{socket.gethostname()}:{pid}:{start_time(pid) or 0}:{uuid.uuid4().hex[:8]}"


_HELD: set[str] = set()  # the owners of the attempts running in this process (the node runs many)


def held(owner: str, running: bool) -> None:
    """An attempt of this process starts (True) or stops (False) driving its job as `owner`."""
    if running:
        _HELD.add(owner)
    else:
        _HELD.discard(owner)


def owned_here(owner: str) -> bool:
    """Whether `owner` names this process (an attempt it runs, or ran)."""
    parts = owner.split(":")
    return len(parts) == 4 and parts[0] == socket.gethostname() and parts[1] == str(os.getpid())


def owner_alive(owner: str) -> bool:
    """Whether the job's owner still drives it: its process lives (and, when that is this process, an
    attempt here holds it: a `--detach`ed job in the node is then followed by the node itself)."""
    parts = owner.split(":")
    if len(parts) != 4 or parts[0] != socket.gethostname():
        return True  # another host's process: we cannot tell, so assume it lives
    try:
        pid, started = int(parts[1]), int(parts[2])
    except ValueError:
        return False
    if pid == os.getpid():
        return owner in _HELD
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
    epoch: int = 0  # the fencing epoch this attempt holds the job at (raised by a take-over)
    on_commit: Callable[[Job, Input | None], None] | None = None  # told each committed step (None: `tell`)
    # The session CLI's running token counters right before the claim, for a CLI that keeps only those
    # (hermes: mam.jobs.usage.mark); held by this attempt only, never written (a take-over has none).
    usage_base: dict[str, int] | None = field(default=None, compare=False)
    _held: _Held | None = field(default=None, init=False, repr=False, compare=False)

    # -- registration -------------------------------------------------------------------------
    @classmethod
    def register(
        cls,
        ws: Workspace,
        registry: Registry,
        job: Job,
        *,
        owner: str,
        meta: dict[str, Any],
        token: str | None = None,
        epoch: int = 0,
    ) -> Ledger:
        made = cls.register_keyed(ws, registry, job, owner=owner, meta=meta, token=token, epoch=epoch)
        assert isinstance(made, Ledger)  # without a key a job is always made
        return made

    @classmethod
    def register_keyed(
        cls,
        ws: Workspace,
        registry: Registry,
        job: Job,
        *,
        owner: str,
        meta: dict[str, Any],
        token: str | None = None,
        key: str = "",
        key_ttl_s: float = 0.0,
        epoch: int = 0,
    ) -> Ledger | JobRow:
        """Register `job`; with an idempotency `key` that still names a job, register nothing and return
        that job's row instead (its audit log gets an `attached` line, in the same transaction). `epoch`: a
        runner's copy starts at the epoch of the dispatch it came in."""
        token = token or secrets.token_hex(32)
        ledger = cls(ws, registry, job, owner, dict(meta), token, epoch=epoch)
        insert = {
            "job_id": job.id,
            "session": job.session,
            "kind": meta.get("kind", "job"),
            "target": meta.get("target", job.session),
            "parent_job": meta.get("parent_job"),
            "state": job.state.value,
            "owner": owner,
            "data": ledger._row_data(),
            "epoch": epoch,
        }
        line = ("created", {"job": job.as_dict(), "meta": meta, "owner": owner, "epoch": epoch})
        attach = {"owner": owner, "target": meta.get("target"), "brief_sha256": meta.get("brief_sha256")}
        held(owner, True)  # before the row names it: a monitor of this process never takes it for dead
        try:
            done = journal.commit(
                registry,
                Transition(
                    job.id,
                    lines=[line],
                    insert=insert,
                    token=token,
                    idempotency_key=key,
                    key_ttl_s=key_ttl_s,
                    attach_fields=attach,
                    attach_requires={
                        "session": job.session,
                        "runner": meta.get("runner"),
                        "target": meta.get("target"),
                        "brief_sha256": meta.get("brief_sha256"),
                    },
                ),
            )
        except BaseException:
            held(owner, False)
            raise
        if done.attached is not None:
            held(owner, False)
            return done.attached
        assert done.row is not None
        ledger.qid = done.row.qid
        return ledger

    @classmethod
    def take_over(cls, ws: Workspace, registry: Registry, job_id: str, *, expected: str | None = None) -> Ledger:
        """Become the owner of an existing job (a retried wrapper); the previous owner stops touching it.

        The job's epoch is raised in the same commit: whatever the previous attempt set going on another
        host (a remote job's runner) speaks for an older epoch from now on (fenced: `stale_epoch`).

        Its audit line is `taken_over`, unless the previous owner is this same process: then it is the normal
        hand-over of a job the process follows itself to its end (the node, once a `--detach`ed delegation
        had its answer, or a wait it serves), logged as `followed` (same fields).

        A compare-and-set on the owner it saw (`expected`: the one its caller found gone): when another attempt
        took the job first (two waits in one node finding it unowned at once), nothing is written and TakenOver is
        raised."""
        token = str(rec.read_record(ws, job_id).get("token", ""))
        previous = registry.job(job_id)
        if expected is not None and previous.owner != expected:
            raise TakenOver(f"job {job_id} was taken over by another attempt first", job_id=job_id)
        owner, epoch = new_owner(), previous.epoch + 1
        own = previous.owner.rsplit(":", 1)[0] == owner.rsplit(":", 1)[0]  # host:pid:start alike
        line = ("followed" if own else "taken_over", {"previous_owner": previous.owner, "owner": owner, "epoch": epoch})
        held(owner, True)
        try:
            done = journal.commit(
                registry,
                Transition(
                    job_id,
                    lines=[line],
                    changes={"owner": owner, "epoch": epoch},
                    expected_owner=previous.owner,
                    token=token,
                ),
            )
        except BaseException:
            held(owner, False)
            raise
        if not done.ok:
            held(owner, False)
            raise TakenOver(f"job {job_id} was taken over by another attempt first", job_id=job_id)
        row = done.row or registry.job(job_id)
        job = Job.from_dict(row.data.get("job", {}))
        return cls(ws, registry, job, owner, dict(row.data.get("meta", {})), token, row.qid, epoch=row.epoch)

    @property
    def fenced(self) -> bool:
        """The job's events come from a runner on another host (this is a remote job's origin): each must carry
        the job's epoch, and one from an older epoch is refused (`stale_epoch`)."""
        return bool(self.meta.get("runner")) and self.meta.get("relay") != "runner"

    # -- transitions --------------------------------------------------------------------------
    def apply(self, inp: Input) -> str:
        """Apply an input; commit if it changed the job. Returns why it was ignored ('' if applied)."""
        new, why = step(self.job, inp)
        if new == self.job:
            if self._held is not None:  # the batch looks at the row once it ends: `_look_again`
                self._held.inputs.append(inp)
            return why or Ignored.NO_CHANGE
        self.commit(new, inp)
        return ""

    def commit(self, new: Job, inp: Input) -> None:
        held = self._held if self._held is not None else _Held(self.job)
        held.inputs.append(inp)
        held.steps.append((new, inp))
        line = {"input": input_to_dict(inp), "state": new.state.value, "reason": new.reason, "exit_code": new.exit_code}
        held.lines.append(("input", line))
        self.job = new
        if self._held is None:
            self._commit(held)

    def note(self, kind: str, **fields: Any) -> None:
        """An audit line, after the inputs a `batch()` still holds."""
        if self._held is not None:
            self._held.lines.append((kind, fields))
        else:
            journal.commit(self.registry, Transition(self.job.id, lines=[(kind, fields)], token=self.token))

    def tell(self) -> None:
        """Tell `on_commit` the job as it is, with no input: what it waits for changed, not the job (another
        job of its session is now ahead of it)."""
        if self.on_commit is not None:
            self.on_commit(self.job, None)

    @contextmanager
    def batch(self) -> Iterator[None]:
        """Hold commits back until the block ends, then commit once (also if the block raises).

        Meanwhile `job` runs ahead in memory. A burst of events then costs one transaction
        instead of one each; the audit log gets the same lines in the same order.
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
        with interrupts.held():  # a commit and what it tells (`on_commit`) are never cut apart by a signal
            self._commit_now(held)

    def _commit_now(self, held: _Held) -> None:
        if not held.steps:
            if held.lines:
                journal.commit(self.registry, Transition(self.job.id, lines=held.lines, token=self.token))
            if held.inputs:  # held, none applied: each was ignored
                self._look_again(held)
            return
        new = held.steps[-1][0]
        changes = {
            "state": new.state.value,
            "reason": new.reason,
            "exit_code": new.exit_code,
            "data": self._row_data(new),
            "ended_at": (new.ended_ms / 1000 if new.ended_ms else None),
        }
        done = journal.commit(
            self.registry,
            Transition(
                new.id,
                lines=held.lines,
                changes=changes,
                expected_owner=self.owner,
                expected_state=held.base.state.value,
                token=self.token,
            ),
        )
        if not done.ok:  # what was seen stays noted; the inputs were not applied
            assert done.row is not None
            self.job = held.base
            self._adopt(done.row)
            self._apply_again(held)
            return
        if self.on_commit is not None:
            for job, inp in held.steps:
                self.on_commit(job, inp)

    def _look_again(self, held: _Held) -> None:
        """A batch that changed nothing but ignored an input: ignored against the job as this attempt held it,
        which the row may have left behind (a resume from outside gives a new nonce: the relaunched agent's
        `started` for it, read against the job still held paused, was ignored as already started and lost).
        When the row moved on, the batch's inputs are applied again to the job as it now is."""
        row = self.registry.job(self.job.id)
        if Job.from_dict(row.data.get("job", {})) == held.base:
            return
        self._adopt(row)
        self._apply_again(held)

    def _apply_again(self, held: _Held) -> None:
        """The inputs a refused commit held (or a batch ignored: `_look_again`), every one, applied again to the
        job as its row now is, when that row is still open: a pause or a resume from outside left it open, and an
        event or a delivery must not be lost for it (a cancel or an end from outside ends it: nothing is applied
        after that). An input ignored against the job as it was held may count now (a `started` with a resume's
        new nonce), one applied may not."""
        if self.job.terminal:
            return
        again = _Held(self.job, inputs=list(held.inputs))  # refused again: all of them once more
        job = self.job
        for inp in held.inputs:
            new, why = step(job, inp)
            if why or new == job:
                continue
            line = {"input": input_to_dict(inp), "state": new.state.value, "reason": new.reason}
            again.steps.append((new, inp))
            again.lines.append(("input", {**line, "exit_code": new.exit_code}))
            job = new
        if again.steps:
            self.job = job
            self._commit_now(again)

    def sync(self) -> None:
        """Take the job as its row now is (a cancel, the monitor, a pause, a resume); raise TakenOver if the owner
        changed."""
        self._adopt(self.registry.job(self.job.id))

    def _adopt(self, row: JobRow) -> None:
        """Whatever changed, not only the state: a pause and a resume from outside between two looks leave the
        state as it was, with a new nonce and the start deadline running again from the resume."""
        if row.owner != self.owner:
            raise self._taken_over()
        stored = Job.from_dict(row.data.get("job", {}))
        if stored != self.job:
            self.job = stored

    def _taken_over(self) -> TakenOver:
        return TakenOver(
            f"job {self.job.id} was taken over by another attempt; this one leaves it unchanged", job_id=self.job.id
        )

    # -- views --------------------------------------------------------------------------------
    def _row_data(self, job: Job | None = None) -> dict[str, Any]:
        return {"job": (job or self.job).as_dict(), "meta": self.meta}

    def record(self) -> dict[str, Any]:
        """The job as this attempt holds it, without the token."""
        return {**self.job.as_dict(), **self.meta, "owner": self.owner}


@dataclass
class _Held:
    """Transitions applied in memory but not committed yet, and the audit lines that follow them."""

    base: Job  # the job as last committed
    steps: list[tuple[Job, Input]] = field(default_factory=list)
    inputs: list[Input] = field(default_factory=list)  # every input, in order, those that changed nothing too
    lines: list[tuple[str, dict[str, Any]]] = field(default_factory=list)
