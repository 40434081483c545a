"""A sandboxed codex kills the heartbeater its `mam event started --heartbeat N` starts (or, in its own
pid namespace, none starts: the agent cannot be seen from there); the wrapper starts it again, so a job
longer than K x N still completes (exit 0) instead of `deadline_timeout`.

The fake codex runs the footer's commands as tool commands and, like codex 0.171 in
`--permissions report`, kills whatever a command leaves running once it returns.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from mam.jobs.record import read_audit
from mam.util.proc import pid_alive
from tests.helpers.mamcli import mam

WORK_S = 7  # longer than K (4, tests/helpers/jobs.py FAST) x the 1 s heartbeat


def log_events(log: Path, event: str) -> list[dict[str, Any]]:
    if not log.exists():
        return []
    return [e for e in map(json.loads, log.read_text().splitlines()) if e["event"] == event]


def delegate_work(ws: Any, name: str, permissions: str, log: Path) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    env = {"MAM_FAKE_AGENT_LOG": str(log)}
    mam(
        "session",
        "create",
        "--agent",
        "codex",
        "--role",
        "dev",
        "--session",
        name,
        "--permissions",
        permissions,
        env=env,
        check=True,
    )
    run = mam(
        "job",
        "delegate",
        "--target",
        f"tmux:{name}",
        "--brief",
        f"work a while\nfake-work: {WORK_S}",
        "--job-id",
        f"job-{name}",
        "--heartbeat",
        "1",
        "--start-deadline",
        "60",
        "--timeout",
        "120",
        "--json",
        timeout=120,
    )
    out = json.loads(run.stdout)
    assert run.returncode == 0, (out.get("reason"), out.get("detail"), run.stderr)
    return out, read_audit(ws, f"job-{name}")


@pytest.mark.parametrize("where", ["in the agent's process", "in the node"])
@pytest.mark.slow  # about 12-25 s: started among the first, not last (tests/conftest.py)
def test_a_sandboxed_codex_job_longer_than_k_heartbeats_completes(wired, fake_agents_on_path, tmp_path, where):
    """Run in the agent's own process (MAM_NODE=0), `mam event started` starts the heartbeater inside the
    sandbox, which kills it (or, in its own pid namespace, none starts): the wrapper restarts it. Served by
    the node, the heartbeater is the node's child, outside the sandbox: nothing kills it."""
    if where == "in the agent's process":
        wired.env_file.write_text("MAM_NODE=0\n")
        wired.env_file.chmod(0o600)
    log = tmp_path / "agents.jsonl"
    out, audit = delegate_work(wired, "cx", "report", log)
    assert out["state"] == "completed" and out["reason"] == "completed"
    sandbox = log_events(log, "sandbox")
    assert sandbox and log_events(log, "tool"), "the fake ran no tool command in its sandbox"
    restarts = [e for e in audit if e["kind"] == "heartbeat_restarted"]
    beats_log = (wired.job_log_dir("job-cx") / "heartbeat.log").read_text()
    if where == "in the node" and not restarts:  # (a node that could not serve leaves it to the agent's process)
        assert "stopped: job_ended" in beats_log
    else:
        if sandbox[0]["pid_namespace"]:  # as in codex: a heartbeater could not see the agent from there
            assert "stopped: agent_unseen" in beats_log
        assert restarts and restarts[0]["interval_s"] == 1 and restarts[0]["agent"] == "codex"
        assert len(restarts) <= 3
        for entry in restarts:
            assert not pid_alive(entry["pid"]), "the restarted heartbeater outlived its job"
    assert not (wired.job_log_dir("job-cx") / "heartbeat.pid").exists()


@pytest.mark.slow  # about 12-25 s: started among the first, not last (tests/conftest.py)
def test_codex_without_its_sandbox_keeps_its_own_heartbeater(wired, fake_agents_on_path, tmp_path):
    log = tmp_path / "agents.jsonl"
    out, audit = delegate_work(wired, "cf", "full", log)
    assert out["state"] == "completed"
    assert not log_events(log, "sandbox") and not log_events(log, "sandbox_killed")
    assert not [e for e in audit if e["kind"] == "heartbeat_restarted"]
