"""CI's short fault schedule: SIGKILL the wrapper, agent, heartbeater, monitor, runner, broker or node at
random moments of 40 jobs, with pauses, resumes and holds beside them; every invariant must hold. The full 200-job run:
`.venv/bin/python -m tests.faults.run --jobs 200 --seed 1`. On a 3-node NATS cluster with the hosts in network
namespaces (NATS nodes killed -9, the runner's host cut off and joined again): a few jobs here, the full run
`.venv/bin/python -m tests.faults.run --jobs 200 --seed 1 --cluster`."""

from __future__ import annotations

import os

import pytest

from tests.faults.cluster import unavailable
from tests.faults.harness import run_schedule

# Read at collection: every test runs with the MAM_* variables of the caller removed (tests/conftest.py).
ROUTINE_SEED = int(os.environ.get("MAM_FAULT_SEED", "20261129"))
ROUTINE_KILLS = int(os.environ.get("MAM_FAULT_ROUTINE_KILLS", "4"))


@pytest.mark.timeout(600)
def test_short_fault_schedule_keeps_every_invariant(tmp_path, mosquitto_broker):
    seed = int(os.environ.get("MAM_FAULT_SEED", "20261129"))
    jobs = int(os.environ.get("MAM_FAULT_JOBS", "40"))
    report = run_schedule(tmp_path / "faults", seed=seed, jobs=jobs)
    print(report.summary())
    assert not report.violations, "\n".join(report.violations)


# Its seed's three waves cut the runner's host off for 10.5 s and for a 4 s blip, each time killing the origin's node
# mid-cut (a take-over at a new epoch), and kill a NATS node.
CLUSTER_SEED = int(os.environ.get("MAM_FAULT_CLUSTER_SEED", "20266848"))
CLUSTER_JOBS = int(os.environ.get("MAM_FAULT_CLUSTER_JOBS", "8"))


@pytest.mark.slow
@pytest.mark.timeout(600)
@pytest.mark.skipif(bool(unavailable()), reason=unavailable() or "the clustered backplane can run here")
def test_cluster_fault_schedule_with_nats_node_kills_and_a_partition_keeps_every_invariant(tmp_path):
    report = run_schedule(tmp_path / "faults", seed=CLUSTER_SEED, jobs=CLUSTER_JOBS, cluster=True, sessions=(2, 3))
    print(report.summary())
    assert not report.violations, "\n".join(report.violations)
    faults = {s.victim for s in report.steps}
    assert {"broker", "partition"} <= faults, f"the seed drew no NATS node kill or no partition: {faults}"


@pytest.mark.timeout(600)
def test_node_kills_during_routine_ticks_never_fire_a_tick_twice(workspace, mosquitto_broker, monkeypatch):
    """tests/faults/routines.py: a routine every 2 s, its node SIGKILLed at seeded moments after ticks fire."""
    from tests.faults.routines import run_routine_kills
    from tests.helpers.jobs import FAST

    for key, value in {**mosquitto_broker.env(), **FAST, "MAM_START_DEADLINE_S": "20"}.items():
        monkeypatch.setenv(key, value)  # a job orphaned between claim and paste ends by its start deadline
    violations, summary = run_routine_kills(workspace, seed=ROUTINE_SEED, kills=ROUTINE_KILLS)
    print(summary)
    assert not violations, "\n".join(violations)


TASK_SEED = int(os.environ.get("MAM_FAULT_SEED", "20261206"))
TASK_KILLS = int(os.environ.get("MAM_FAULT_TASK_KILLS", "4"))


@pytest.mark.timeout(600)
def test_node_kills_while_tasks_with_blockers_run_never_give_a_task_two_jobs(workspace, mosquitto_broker, monkeypatch):
    """tests/faults/tasks.py: tasks with blockers over two roles, their node SIGKILLed at seeded moments after a
    task's job was made."""
    from tests.faults.tasks import run_task_kills
    from tests.helpers.jobs import FAST

    for key, value in {**mosquitto_broker.env(), **FAST, "MAM_START_DEADLINE_S": "20"}.items():
        monkeypatch.setenv(key, value)  # a job orphaned between claim and paste ends by its start deadline
    violations, summary = run_task_kills(workspace, seed=TASK_SEED, kills=TASK_KILLS)
    print(summary)
    assert not violations, "\n".join(violations)
