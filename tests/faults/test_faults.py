"""CI's short fault schedule: SIGKILL the wrapper, agent, heartbeater, monitor, runner or broker at
random moments of 40 jobs; every invariant must hold. The full 200-job run:
`.venv/bin/python -m tests.faults.run --jobs 200 --seed 1`."""

from __future__ import annotations

import os

import pytest

from tests.faults.harness import run_schedule


@pytest.mark.timeout(600)
def test_short_fault_schedule_keeps_every_invariant(tmp_path, mosquitto_broker):
    seed = int(os.environ.get("MAM_FAULT_SEED", "20261129"))
    jobs = int(os.environ.get("MAM_FAULT_JOBS", "40"))
    report = run_schedule(tmp_path / "faults", seed=seed, jobs=jobs)
    print(report.summary())
    assert not report.violations, "\n".join(report.violations)
