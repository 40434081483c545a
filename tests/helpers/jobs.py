"""Job-level helpers for end-to-end tests: demo sessions, pane captures, audit replays."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path
from typing import Any

from mam.jobs.ledger import Ledger, new_job_id, new_owner
from mam.jobs.model import Job, JobState
from mam.jobs.record import now_ms, read_audit
from mam.store.registry import Registry
from mam.workspace import Workspace
from tests.helpers.mamcli import mam

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

    Made in this process, through the library function `mam session create` calls (`start_session`), with what the
    command would read: the settings and workspace of this test's environment, `env` on top (the demo agent's
    `MAM_DEMO_*`, which travel into its pane). A test's sessions are its set-up, not what it tests (the command is
    tested in tests/sessions/): a `mam` process for each of ~600 sessions a run makes cost ~0.14 CPU-s each, about 45
    CPU-s of a run beyond the work. With `extra` options (`--worktree`...) or an `env` that changes anything beyond the
    pane (`TMUX_TMPDIR`), the real command makes it."""
    env = {"MAM_DEMO_BEHAVIOUR": behaviour, **(env or {})}
    if extra or any(not key.startswith("MAM_DEMO_") for key in env):
        proc = mam(
            "session", "create", "--agent", "demo", "--role", role, "--session", name, "--json", *extra,
            env=env, check=True,
        )  # fmt: skip
        return json.loads(proc.stdout)
    from mam.errors import MamError
    from mam.sessions.create import start_session
    from mam.settings import load_settings
    from mam.workspace import find_workspace

    environ = {**os.environ, **env}
    try:
        ws = find_workspace(None, environ=environ)
        made = start_session(
            name=name,
            agent="demo",
            role=role,
            ws=ws,
            settings=load_settings(env_file=ws.env_file, environ=environ),
            registry_of=lambda: Registry(ws),
            environ=environ,
        )
    except MamError as e:
        raise AssertionError(f"creating demo session {name} failed (exit {e.exit_code}): {e}") from e
    return made.row.as_dict()


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
