"""bench/governor_stress.py still runs: a tiny run (6 submissions of 2 briefs, 1 demo session, cap 1).

Marked slow: about 10 s on the shared 2-core machine, most of it the demo session's start.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parents[2] / "bench" / "governor_stress.py"


@pytest.mark.slow
def test_a_tiny_stress_run_collapses_duplicates_and_holds_the_cap():
    argv = ["--submissions", "6", "--distinct", "2", "--sessions", "1", "--workers", "3", "--max-running", "1"]
    proc = subprocess.run(
        [sys.executable, str(BENCH), *argv, "--budget", "100000", "--json"], capture_output=True, text=True, timeout=110
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    r = json.loads(proc.stdout)
    assert (r["submitted"], r["reached_queue"], r["collapsed"], r["executed"]) == (6, 2, 4, 2), r
    assert r["peak_running_registry"] <= 1 and r["peak_working_logs_exact"] <= 1 and r["open_at_end"] == 0, r
    assert r["succeeded"] == 6 and r["tokens_committed"] == r["tokens_measured"] > 0, r
