"""Job-level helpers for end-to-end tests: demo sessions, pane captures, audit replays."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

from mam.jobs.ledger import Ledger, new_job_id, new_owner
from mam.jobs.model import Job, JobState
from mam.jobs.record import now_ms, read_audit
from mam.store.registry import Registry
from mam.workspace import Workspace
from tests.helpers.mamcli import in_process, mam

FAST = {"MAM_POLL_S": "0.05", "MAM_HEARTBEAT_K": "4"}


def delivered_job_at(at: int | None = None, **fields: Any) -> Job:
    """A job of session `worker` as its wrapper has it once the brief is in the pane (delivered at `at`, ms;
    now by default), deadlines of ten minutes and an hour; `fields` change any of it (state, session...)."""
    at = now_ms() if at is None else at
    defaults: dict[str, Any] = {
        "id": new_job_id(),
        "session": "worker",
        "nonce": "n0nce",
        "created_ms": at,
        "start_deadline_ms": 600_000,
        "heartbeat_ms": 600_000,
        "heartbeat_k": 4,
        "budget_ms": 3_600_000,
        "state": JobState.DELIVERED,
        "claimed_ms": at,
        "delivered_ms": at,
    }
    return Job(**{**defaults, **fields})


def register_delivered(
    ws: Workspace, registry: Registry, *, topic_prefix: str, heartbeat_ms: int = 600_000, started: bool = False
) -> Ledger:
    """A job of session `worker` registered as its wrapper has it once the brief is in the pane
    (`started`: and once the agent acknowledged it), without a pane or a broker."""
    now = now_ms()
    job = delivered_job_at(
        now,
        heartbeat_ms=heartbeat_ms,
        state=JobState.RUNNING if started else JobState.DELIVERED,
        started_ms=now if started else None,
    )
    meta = {"target": "worker", "kind": "job", "topic_prefix": topic_prefix}
    return Ledger.register(ws, registry, job, owner=new_owner(), meta=meta)


def create_demo(
    name: str,
    *,
    behaviour: str = "ok",
    env: dict[str, str] | None = None,
    role: str = "dev",
    extra: tuple[str, ...] = (),
) -> dict[str, Any]:
    """A running demo session NAME, as `mam session create --agent demo --json` prints it.

    The command runs in this process (`run_cli`, as the `mam` script runs it, with click's test isolation: its own
    stdout, `env` set in the environment for the call): a test's sessions are its set-up, not what it tests (the
    command's process is tested in tests/sessions/), and a `mam` process for each of the ~400 demo sessions a run
    makes cost ~0.14 CPU-s of start-up and imports. With `extra` options (`--worktree`...) or an `env` beyond the
    demo agent's `MAM_DEMO_*` (`TMUX_TMPDIR`), a `mam` process makes it."""
    env = {"MAM_DEMO_BEHAVIOUR": behaviour, **(env or {})}
    args = ["session", "create", "--agent", "demo", "--role", role, "--session", name, "--json", *extra]
    if extra or any(not key.startswith("MAM_DEMO_") for key in env):
        return json.loads(mam(*args, env=env, check=True).stdout)
    proc = in_process(tuple(args), env=env)
    if proc.returncode != 0:
        raise AssertionError(
            f"mam {' '.join(args)} exited {proc.returncode}\nstdout: {proc.stdout}\nstderr: {proc.stderr}"
        )
    return json.loads(proc.stdout)


def capture(tmux_name: str, pane_id: str) -> str:
    out = subprocess.run(
        ["tmux", "-L", tmux_name, "capture-pane", "-p", "-J", "-S", "-", "-t", pane_id], capture_output=True, text=True
    )
    return out.stdout


def replayed_state(ws: Workspace, job_id: str) -> Job:
    """Fold the audit log's inputs through the model, from the job as it was created."""
    from mam.jobs.audit_log import replay_job

    return replay_job(ws, job_id)


def audit_kinds(ws: Workspace, job_id: str) -> list[dict[str, Any]]:
    return read_audit(ws, job_id)


def record(ws: Workspace, job_id: str) -> dict[str, Any]:
    return json.loads(Path(ws.job_record(job_id)).read_text())


def registered_session(root: Path, name: str = "w") -> None:
    """A running session row in the registry of the workspace at `root` (no pane: for a test whose
    delegation must get past the target check and fail later, e.g. at the broker)."""
    from mam.store.sessions import SessionRow, SessionStatus

    registry = Registry(Workspace(root))
    try:
        registry.add_session(
            SessionRow(
                name=name,
                agent="demo",
                role="dev",
                backend="tmux",
                server="none",
                cwd=str(root),
                status=SessionStatus.RUNNING,
            )
        )
    finally:
        registry.close()
