"""The fault schedule's governor variant (`--governor`): a running-job cap and a token budget on, and
the same SIGKILLs. Invariants checked here:

- peak running <= the cap: sampled from the origin's registry every 20 ms by an independent thread
  (held reservations of open jobs), and from the demo agents' own logs (their `work` turns) for the
  jobs that completed (an agent may go on working after its job timed out: that is not a slot);
- 0 leaked slots and 0 leaked reservations at the end: no reservation still queued or held, on either
  host, once every job ended and the probe jobs ran (their admissions settle what dead wrappers left).
"""

from __future__ import annotations

import json
import sqlite3
import threading
from dataclasses import dataclass, field
from pathlib import Path

from mam.outcomes import OPEN_STATES, JobState

CAP = 3
BUDGET = 50_000_000  # on, large enough that the probe jobs at the end still fit
ESTIMATE = 500


def env() -> dict[str, str]:
    return {"MAM_MAX_RUNNING_JOBS": str(CAP), "MAM_TOKEN_BUDGET": str(BUDGET)}


def wrapper_args() -> list[str]:
    return ["--estimate-tokens", str(ESTIMATE)]


@dataclass
class Sampler:
    """Counts the origin's running slots from its registry, on a thread of its own."""

    db: Path
    peak: int = 0
    samples: int = 0
    stop: threading.Event = field(default_factory=threading.Event)
    thread: threading.Thread | None = None

    def start(self) -> None:
        self.thread = threading.Thread(target=self._run, name="governor-sampler", daemon=True)
        self.thread.start()

    def _run(self) -> None:
        marks = ",".join("?" * len(OPEN_STATES))
        sql = (
            "SELECT COUNT(*) FROM reservations r JOIN jobs j ON j.id = r.job_id "
            f"WHERE r.status = 'held' AND j.state IN ({marks})"
        )
        while not self.stop.wait(0.02):
            try:
                conn = sqlite3.connect(f"file:{self.db}?mode=ro", uri=True, timeout=5)
                try:
                    n = int(conn.execute(sql, OPEN_STATES).fetchone()[0])
                finally:
                    conn.close()
            except sqlite3.Error:
                continue  # the registry not made yet, or busy: the next sample
            self.samples += 1
            self.peak = max(self.peak, n)

    def finish(self) -> None:
        self.stop.set()
        if self.thread is not None:
            self.thread.join(timeout=5)


def agents_peak(workspaces: list[Path], completed: set[str]) -> int:
    """The most demo agents working at once on jobs that completed, from their conversation files."""
    marks: list[tuple[float, int]] = []
    for ws in workspaces:
        for path in (ws / ".mam" / "demo-agent" / "conversations").glob("*.json"):
            begun: dict[str, float] = {}
            try:
                turns = json.loads(path.read_text())["turns"]
            except (OSError, ValueError, KeyError):
                continue
            for turn in turns:
                job = turn.get("job")
                if turn.get("work") == "begin":
                    begun[job] = turn["ts"]
                elif turn.get("work") == "end" and job in begun and job in completed:
                    marks += [(begun.pop(job), 1), (turn["ts"], -1)]
    level = top = 0
    for _at, step in sorted(marks):
        level += step
        top = max(top, level)
    return top


def leaks(db: Path) -> tuple[int, int, int]:
    """(slots held by jobs still open, reservations neither committed nor released, tokens committed)."""
    conn = sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=30)
    try:
        marks = ",".join("?" * len(OPEN_STATES))
        slots = conn.execute(
            "SELECT COUNT(*) FROM reservations r JOIN jobs j ON j.id = r.job_id "
            f"WHERE r.status = 'held' AND j.state IN ({marks})",
            OPEN_STATES,
        ).fetchone()[0]
        unsettled = conn.execute("SELECT COUNT(*) FROM reservations WHERE status IN ('queued', 'held')").fetchone()[0]
        committed = conn.execute("SELECT COALESCE(SUM(committed), 0) FROM reservations").fetchone()[0]
    finally:
        conn.close()
    return int(slots), int(unsettled), int(committed)


def completed_jobs(db: Path) -> set[str]:
    conn = sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=30)
    try:
        rows = conn.execute("SELECT id FROM jobs WHERE state = ?", (JobState.COMPLETED.value,)).fetchall()
    finally:
        conn.close()
    return {r[0] for r in rows}
