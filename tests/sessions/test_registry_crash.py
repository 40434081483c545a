"""Registry writes under concurrent writers and kill -9 (Guarantee 5).

Twenty writer processes each update their own session row 100 times through the library;
some are killed with SIGKILL at seeded random points of their run. What a writer reports as
committed (its fsynced progress file) must be in the database, the database must pass
`PRAGMA integrity_check`, the mirror must never be seen half-written, and one refresh must
bring the mirror back in line with the database whatever the last writer was doing when it died.
"""

from __future__ import annotations

import os
import random
import sqlite3
import subprocess
import sys
import time
from contextlib import closing
from pathlib import Path
from typing import Any

import pytest

from mam.store.registry import Registry
from mam.store.sessions import SessionRow, SessionStatus
from mam.workspace import Workspace
from tests.sessions.conftest import WRITER, assert_mirror_matches_db, db_sessions

WRITERS = 20
UPDATES = 100
VICTIMS = 8
SEED = int(os.environ.get("MAM_TEST_SEED", "5125"))


def last_committed(progress: Path) -> int:
    """The last counter the writer fsynced after a returned (committed) update; 0 if none."""
    if not progress.exists():
        return 0
    lines = progress.read_text().split("\n")
    complete = [line for line in lines[:-1] if line]  # a line without its newline was cut by the kill
    return int(complete[-1]) if complete else 0


# The deadlines below are generous bounds, not timings: 20 writers fsyncing 100 commits each take about 40 s on a
# loaded 2-core machine, and a bound a heavier load can reach would fail the test with no update lost.
@pytest.mark.timeout(420)
def test_killed_writers_lose_no_committed_update_and_leave_a_sound_registry(
    workspace: Workspace, tmp_path: Path, mirror_reader: Any, poll: Any
) -> None:
    rng = random.Random(SEED)
    names = [f"writer-{i:02d}" for i in range(WRITERS)]
    registry = Registry(workspace)
    for name in names:
        registry.add_session(
            SessionRow(
                name=name,
                agent="demo",
                role="dev",
                backend="tmux",
                server="none",
                cwd=str(workspace.root),
                status=SessionStatus.STOPPED,
            )
        )
    registry.close()

    # Each victim dies a seeded 0-300 ms after its progress reaches a seeded threshold: the kill
    # lands wherever it then is (waiting for the lock, inside the transaction, committing,
    # rewriting the mirror, appending its progress).
    victims = {i: (rng.randint(0, UPDATES - 10), rng.uniform(0.0, 0.3)) for i in rng.sample(range(WRITERS), VICTIMS)}
    due: dict[int, float] = {}
    progress = [tmp_path / f"progress-{i:02d}" for i in range(WRITERS)]
    errors = [tmp_path / f"stderr-{i:02d}" for i in range(WRITERS)]
    reader = mirror_reader(workspace)
    procs = []
    for i, name in enumerate(names):
        with open(errors[i], "wb") as err:
            procs.append(
                subprocess.Popen(
                    [sys.executable, str(WRITER), str(workspace.root), name, str(UPDATES), str(progress[i])],
                    stdout=subprocess.DEVNULL,
                    stderr=err,
                )
            )
    killed: set[int] = set()

    def kill_due_victims() -> bool:
        now = time.monotonic()
        for i, (threshold, delay) in victims.items():
            if i in killed:
                continue
            if i not in due and last_committed(progress[i]) >= threshold:
                due[i] = now + delay
            if (i in due and now >= due[i]) or procs[i].poll() is not None:
                procs[i].kill()  # SIGKILL, through the writer's own handle
                killed.add(i)
        return len(killed) == len(victims)

    started = time.monotonic()
    try:
        poll(
            kill_due_victims,
            timeout=240,
            interval=0.01,
            message=lambda: f"victims {victims}, killed {sorted(killed)} (seed {SEED})",
        )
        for proc in procs:
            proc.wait(timeout=max(1.0, 360 - (time.monotonic() - started)))
    finally:
        for proc in procs:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
    took = time.monotonic() - started
    seen = reader.stop()

    survivors = [i for i in range(WRITERS) if i not in victims]
    for i in survivors:
        assert procs[i].returncode == 0, f"{names[i]} failed: {errors[i].read_text()}"
    died_mid_run = [i for i in victims if procs[i].returncode == -9]
    assert died_mid_run, f"no victim was killed before it finished (seed {SEED})"

    with closing(sqlite3.connect(workspace.db_path)) as conn:
        assert conn.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
    _generation, rows = db_sessions(workspace)
    notes = {row["name"]: int(row["note"] or 0) for row in rows}
    for i, name in enumerate(names):
        committed = last_committed(progress[i])
        assert notes[name] >= committed, (
            f"{name}: progress says {committed} was committed, the database has {notes[name]} (seed {SEED})"
        )
        # At most one commit the writer did not live to record; never a value it did not write.
        assert notes[name] <= committed + 1, f"{name}: database {notes[name]}, progress {committed} (seed {SEED})"
        if i in survivors:
            assert notes[name] == committed == UPDATES

    assert seen["reads"] > 0, seen
    assert seen["failure_count"] == 0, seen["failures"]

    registry = Registry(workspace)
    registry.refresh_mirror()
    registry.close()
    assert_mirror_matches_db(workspace)
    print(
        f"{WRITERS}x{UPDATES} updates, {len(died_mid_run)} writers killed mid-run, in {took:.1f}s; "
        f"mirror read {seen['reads']} times, {seen['generations_seen']} generations seen (seed {SEED})"
    )
