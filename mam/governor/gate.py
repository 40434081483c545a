"""The governor's hold on one job, driven by its wrapper (mam.jobs.attempt): admit it (a running slot
and a token reservation, taken in one registry transaction with the check that they fit), stop it
when its measured usage passes its --max-tokens, and settle its reservation when it ends.

The registry is the queue: a waiting wrapper asks again on each round of its wait, and the first
in the registry's job order that fits goes first, whatever process it is in. No daemon.
"""

from __future__ import annotations

import logging
import statistics
import time
from typing import Any

from mam.governor import budget
from mam.governor.admission import Verdict, Want, decide
from mam.jobs import record as rec
from mam.jobs.ledger import Ledger, owner_alive
from mam.jobs.stale import close_if_abandoned
from mam.jobs.usage import measure, total
from mam.outcomes import OPEN_STATES, JobState
from mam.settings import Settings
from mam.store import reservations as rs
from mam.store import sessions as sessions_table
from mam.store.registry import Registry

log = logging.getLogger(__name__)
RECENT = 20  # completed jobs of a role whose median usage is the estimate
FOLLOWED = (JobState.DELIVERING, JobState.DELIVERED, JobState.RUNNING)


def estimate_for(conn: Any, role: str, settings: Settings) -> int:
    """A job's reservation without --estimate-tokens: the median measured usage of its role's last RECENT
    completed jobs, else MAM_DEFAULT_ESTIMATE_TOKENS."""
    recent = rs.recent_usage(conn, role, JobState.COMPLETED.value, RECENT) if role else []
    return int(statistics.median(recent)) if recent else settings.default_estimate_tokens


class Governor:
    """One attempt's dealings with the caps (see the module docstring)."""

    def __init__(self, registry: Registry, settings: Settings, ledger: Ledger) -> None:
        self.registry, self.settings, self.ledger = registry, settings, ledger
        self._want: Want | None = None
        self._checked_seq = -1
        self._next_check = 0.0

    # -- admission ----------------------------------------------------------------------------
    def admit(self) -> Verdict:
        """Admit the job, queue it, or refuse it; the slot and the reservation are taken in the same
        transaction as the check. A job already admitted (a retry that took it over) stays admitted."""
        job, notes = self.ledger.job, []
        if self._want is not None:  # it waited: a dead wrapper's job ends by its own rules, freeing its slot
            for other in self._abandoned():
                close_if_abandoned(self.registry.ws, self.registry, other)
            with self.registry.read() as conn:  # still held? then no write lock is taken for nothing
                verdict = self._decide(conn, self._want)
            if verdict.hold is not None:
                return verdict
        with self.registry.write() as conn:
            budget.settle_orphans(conn)
            mine = rs.find(conn, job.id)
            if mine is not None and mine.status == rs.HELD:
                return Verdict(True)
            want = self._want or self._wanted(conn)
            self._want = want
            verdict = self._decide(conn, want)
            status = rs.HELD if verdict.admitted else rs.QUEUED
            rs.put(
                conn,
                job_id=job.id,
                qid=want.qid,
                session=want.session,
                role=want.role,
                reserved=want.tokens,
                status=status,
            )
            if verdict.refused:
                rs.settle(conn, job.id, committed=0, source="")
            elif verdict.admitted:
                notes = budget.warnings(conn, self.settings, session=want.session)
        budget.tell(self.ledger, self.settings, notes)
        return verdict

    def _decide(self, conn: Any, want: Want) -> Verdict:
        rows = [r for r in rs.unsettled(conn) if not budget.orphaned(r)]  # settled by the next write
        ahead = [budget.want_of(r) for r in rows if r.status == rs.QUEUED and budget.contends(r, want)]
        return decide(want, ahead, budget.load(conn, rows, self.settings, want))

    def _abandoned(self) -> list[str]:
        """Open jobs holding a slot, or queued, whose wrapper is dead."""
        with self.registry.read() as conn:
            rows = rs.unsettled(conn)
        return [
            r.job_id
            for r in rows
            if r.job_id != self.ledger.job.id and r.job_state in OPEN_STATES and not owner_alive(r.owner)
        ]

    def _wanted(self, conn: Any) -> Want:
        job, meta = self.ledger.job, self.ledger.meta
        row = sessions_table.find(conn, job.session)
        role = row.role if row is not None else ""
        estimate = meta.get("estimate_tokens")
        if not isinstance(estimate, int):
            estimate = estimate_for(conn, role, self.settings)
        cap = meta.get("max_tokens")
        tokens = min(estimate, cap) if isinstance(cap, int) and cap > 0 else estimate
        return Want(job_id=job.id, qid=self.ledger.qid, session=job.session, role=role, tokens=max(tokens, 0))

    # -- while it runs --------------------------------------------------------------------------
    def over_budget(self) -> str:
        """'' while the job's measured usage is within its --max-tokens; else why it must stop. Looked at
        on each new event of the job and at least once per heartbeat interval."""
        job, cap = self.ledger.job, self.ledger.meta.get("max_tokens")
        if not isinstance(cap, int) or cap <= 0 or job.state not in FOLLOWED:
            return ""
        now = time.monotonic()
        if job.last_seq == self._checked_seq and now < self._next_check:
            return ""
        self._checked_seq, self._next_check = job.last_seq, now + job.heartbeat_ms / 1000
        try:
            usage = measure(self.registry.ws, self.registry, self.ledger, until_ms=rec.now_ms(), settle=False)
        except (OSError, ValueError) as e:
            log.warning("job %s: usage not read: %s", job.id, e)
            return ""
        spent = total(usage) or 0
        if spent <= cap:
            return ""
        return f"its measured usage, {spent} tokens, passed --max-tokens {cap}"

    # -- at the end -----------------------------------------------------------------------------
    def settle(self) -> None:
        """Commit the job's measured usage (its estimate when it was delivered but nothing could be
        measured), or release the reservation when the brief never reached the agent."""
        job = self.ledger.job
        if not job.terminal:
            return
        usage = self.ledger.meta.get("usage")
        notes = []
        with self.registry.write() as conn:
            row = rs.find(conn, job.id)
            if row is None or row.status not in (rs.QUEUED, rs.HELD) or row.owner != self.ledger.owner:
                return
            spent, source = budget.spent_by(row, usage, claimed=job.claimed_ms is not None)
            if rs.settle(conn, job.id, committed=spent, source=source):
                notes = budget.warnings(conn, self.settings, session=row.session)
        if spent or source:
            self.ledger.note("budget_settled", tokens=spent, source=source, reserved=row.reserved)
        budget.tell(self.ledger, self.settings, notes)
