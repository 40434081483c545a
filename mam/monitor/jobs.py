"""Orphaned jobs: jobs whose wrapper died. The monitor follows their events (disk path and MQTT)
into the registry and closes them by their own deadlines, so none is left open forever. Each pass takes
the job as its row is then (`Ledger.sync`): a pause, a resume or an end by another process meanwhile counts."""

from __future__ import annotations

from dataclasses import dataclass, field

from mam.errors import MamError
from mam.jobs import record as rec
from mam.jobs.intake import Intake
from mam.jobs.ledger import Ledger, TakenOver, owner_alive
from mam.jobs.model import Job, Tick
from mam.jobs.stale import close_if_abandoned
from mam.outcomes import UNCLAIMED_STATES
from mam.store import jobs as jobs_table
from mam.store import journal
from mam.store.registry import Registry
from mam.workspace import Workspace


@dataclass
class OrphanFollower:
    ws: Workspace
    registry: Registry
    followed: dict[str, Intake] = field(default_factory=dict)

    def feed(self, job_id: str, payload: bytes) -> None:
        intake = self.followed.get(job_id)
        if intake is not None:
            intake.feed(payload)

    def wants(self, job_id: str) -> bool:
        return job_id in self.followed

    def export_orphans(self, since: float) -> list[tuple[str, str]]:
        """Export what a process committed and died before exporting: the same export every commit runs,
        for the jobs updated since `since` whose owner is gone."""
        with self.registry.read() as conn:
            rows = jobs_table.recently_updated(conn, since)
        exported = []
        for row in rows:
            if owner_alive(row.owner):
                continue
            added = journal.export(self.registry, row.id)
            if added:
                exported.append((row.id, f"exported {added} committed audit line(s) missing from its audit log"))
        return exported

    def step(self) -> list[tuple[str, str]]:
        """One pass over every open job; returns (job id, what happened) for each repair."""
        repairs: list[tuple[str, str]] = []
        with self.registry.read() as conn:
            open_rows = jobs_table.open_jobs(conn)
        open_ids = {r.id for r in open_rows}
        for job_id in list(self.followed):
            if job_id not in open_ids:
                self.followed.pop(job_id).flush()  # the count of rejections not written one by one
        for row in open_rows:
            if owner_alive(row.owner):
                dropped = self.followed.pop(row.id, None)
                if dropped is not None:
                    dropped.flush()
                continue
            if row.state in UNCLAIMED_STATES:
                ended = close_if_abandoned(self.ws, self.registry, row.id, by="monitor")
                if ended is not None:
                    repairs.append((row.id, f"{ended.state.value} ({ended.reason}): its wrapper died before delivery"))
                continue
            intake = self.followed.get(row.id)
            if intake is not None and intake.ledger.owner != row.owner:  # taken over by an attempt that died too
                self.followed.pop(row.id).flush()
                intake = None
            intake = intake or self._follow(row.id)
            if intake is None:
                continue
            try:
                # As the row is now, never as the last pass left it: a pause and a resume from another process
                # between two passes change its nonce and its deadlines (and a pause or an end, its state).
                intake.ledger.sync()
            except TakenOver:  # an attempt took it over since the look above: it follows the job
                self.followed.pop(row.id).flush()
                continue
            except MamError as e:
                repairs.append((row.id, f"could not follow: {e}"))
                continue
            before = intake.ledger.job.state
            try:
                intake.pump(0)
                intake.ledger.apply(Tick(rec.now_ms()))
            except MamError as e:
                repairs.append((row.id, f"could not follow: {e}"))
                continue
            after = intake.ledger.job
            if after.state is not before:
                repairs.append(
                    (
                        row.id,
                        f"{before.value} -> {after.state.value}{' (' + after.reason + ')' if after.reason else ''}; "
                        "its wrapper is gone",
                    )
                )
        return repairs

    def _follow(self, job_id: str) -> Intake | None:
        """Adopt an orphan: drive it with the dead owner's name, so a returning attempt can still take it over."""
        row = self.registry.find_job(job_id)
        if row is None:
            return None
        try:
            token = str(rec.read_record(self.ws, job_id).get("token", ""))
        except MamError:
            return None
        job = Job.from_dict(row.data.get("job", {}))
        meta = dict(row.data.get("meta", {}))
        ledger = Ledger(self.ws, self.registry, job, row.owner, meta, token, row.qid, epoch=row.epoch)
        intake = Intake(ledger, self.registry, local=not row.data.get("meta", {}).get("runner"))
        self.followed[job_id] = intake
        ledger.note("monitor_follows", owner=row.owner, note="the wrapper is gone; the monitor follows this job")
        return intake
