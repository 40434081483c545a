"""What `mam hook AGENT` does with one hook call: never fail the agent, never make it wait.

It reads the hook's JSON (stdin, or the last argument for codex's `notify`), turns it into an
activity, writes it to the session's activity file and, when the session has an open job that
was delivered, records a signed `activity` event for that job (on disk: the local wrapper reads
the store, a runner relays a remote job's events). Whatever happens it exits 0, within
HOOK_BUDGET_S; its own errors go to `.mam/sessions/<name>/hook-errors.log`. It prints nothing: some
CLIs read a hook's output as a decision (allow, deny, block).
"""

from __future__ import annotations

import json
import os
import signal
import sys
import time
import traceback
from collections.abc import Mapping
from typing import Any

from mam.outcomes import Exit, JobState
from mam.workspace import Workspace

HOOK_BUDGET_S = 4.0  # a hook that has not finished by then gives up, silently, with exit 0
MAX_INPUT = 1024 * 1024
DELIVERED_STATES = (JobState.DELIVERING.value, JobState.DELIVERED.value, JobState.RUNNING.value)


def _give_up(_signum: int, _frame: Any) -> None:
    os._exit(Exit.OK)


def main(agent: str, session: str, workspace: str, payload: str | None) -> int:
    """The whole of `mam hook`; returns 0 always."""
    signal.signal(signal.SIGALRM, _give_up)
    signal.setitimer(signal.ITIMER_REAL, HOOK_BUDGET_S)
    ws: Workspace | None = None
    try:
        found = Workspace(root=_root(workspace))
        found.check_trusted()  # as every command: another user's `.mam/` gets nothing written, not even an error
        ws = found
        raw = payload if payload is not None else sys.stdin.read(MAX_INPUT)
        _trace(agent, raw)
        hook = json.loads(raw) if raw.strip() else {}
        if isinstance(hook, Mapping):
            handle(ws, agent, session, hook)
    except BaseException as e:  # noqa: BLE001 - nothing may reach the agent
        _log_error(ws, session, e)
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
    return Exit.OK


def _trace(agent: str, raw: str) -> None:
    """MAM_HOOK_TRACE=FILE (tests, and checking what a CLI sends): append each call's raw JSON."""
    target = os.environ.get("MAM_HOOK_TRACE")
    if target:
        fd = os.open(target, os.O_WRONLY | os.O_CREAT | os.O_APPEND | os.O_NOFOLLOW, 0o600)
        with os.fdopen(fd, "a", encoding="utf-8") as f:
            f.write(json.dumps({"agent": agent, "ts": time.time(), "raw": raw}) + "\n")


def _root(workspace: str) -> Any:
    from pathlib import Path

    return Path(workspace or os.environ.get("MAM_WORKSPACE") or os.getcwd()).resolve()


def handle(ws: Workspace, agent: str, session: str, hook: Mapping[str, Any]) -> str:
    """Apply one hook call; returns the job the activity was recorded for ('' for none)."""
    from mam.hooks.translate import translate

    act = translate(agent, hook)
    if act is None or not session or not ws.state.is_dir():
        return ""  # never create a workspace from a hook
    if agent == "codex" and not _main_thread(ws, session, act.conversation_id):
        return ""  # codex's side thread (the title it asks the model for): not the agent's turn
    job, seen = apply(ws, session, act)
    if act.source == "SessionStart" and act.conversation_id:
        _note_conversation(ws, session, act.conversation_id)
    if act.source == "PreToolUse":
        _watch_for_prompt(ws, session, act, seen["at"])
    return job


def apply(
    ws: Workspace, session: str, act: Any, *, at_ms: int | None = None, via: str = "hook"
) -> tuple[str, dict[str, Any]]:
    """Record one activity of the session (its file; a notification for a wait) and, when the session has
    a delivered open job, a signed `activity` event for that job: a hook's call, or a record read from the
    CLI's own store (mam.hooks.store_watch; `at_ms`: when the CLI wrote it, so a record older than the job's
    claim never counts for the job). Returns (the job it counted for, '' for none; the session's file)."""
    from mam.hooks import session_state

    job = _open_job(ws, session, at_ms=at_ms)
    seen = session_state.record(ws, session, act, job=job, via=via)
    _tell_waiting(ws, session, act, job, seen)
    if job:
        _emit(ws, job, act)
    return job, seen


def _tell_waiting(ws: Workspace, session: str, act: Any, job: str, seen: Mapping[str, Any]) -> None:
    """The agent waits for a person: one notification per wait (MAM_NOTIFY; a detached sender, never waited for)."""
    if act.state != "waiting":
        return
    from mam import notify

    since = seen.get("waiting_since") or seen.get("at") or ""
    notify.waiting(ws, None, session, job=job, tool=act.tool, message=act.message, since=f"{since}")


def _main_thread(ws: Workspace, session: str, thread: str) -> bool:
    """codex notifies the end of every thread's turn, its title query's too: only the session's own
    conversation counts (the one the row names; before mam learnt it, one codex keeps a rollout of)."""
    from mam.agents import get_adapter
    from mam.store.registry import Registry

    registry = Registry.open_existing(ws)
    if registry is None or not thread:
        return False
    try:
        row = registry.find_session(session)
        if row is None:
            return False
        if row.conversation_id:
            return row.conversation_id == thread
        if not get_adapter(row.agent).conversation_exists(thread, cwd=row.cwd, env=row.agent_env):
            return False
        registry.update_session(session, conversation_id=thread)
        return True
    finally:
        registry.close()


def _note_conversation(ws: Workspace, session: str, conversation_id: str) -> None:
    """The conversation id a SessionStart hook told, on a session row that has none yet."""
    from mam.store.registry import Registry

    registry = Registry.open_existing(ws)
    if registry is None:
        return
    try:
        row = registry.find_session(session)
        if row is not None and not row.conversation_id:
            registry.update_session(session, conversation_id=conversation_id)
    finally:
        registry.close()


def _watch_for_prompt(ws: Workspace, session: str, act: Any, seen_at: float) -> None:
    """In a detached child: record `waiting` if a permission prompt holds this tool call up."""
    from mam.hooks import prompt_watch, session_state

    if not prompt_watch.detach():
        return
    try:
        signal.setitimer(signal.ITIMER_REAL, prompt_watch.WATCH_S + HOOK_BUDGET_S)
        waiting = prompt_watch.watch(ws, session, act, seen_at)
        if waiting is not None:
            job = _open_job(ws, session)
            seen = session_state.record(ws, session, waiting, job=job)
            _tell_waiting(ws, session, waiting, job, seen)
            if job:
                _emit(ws, job, waiting)
    except BaseException as e:  # noqa: BLE001
        _log_error(ws, session, e)
    finally:
        os._exit(Exit.OK)


def _open_job(ws: Workspace, session: str, *, at_ms: int | None = None) -> str:
    from mam.store import jobs as jobs_table
    from mam.store.registry import Registry

    registry = Registry.open_existing(ws)
    if registry is None:
        return ""
    try:
        with registry.read() as conn:
            rows = jobs_table.open_jobs(conn, session)
    finally:
        registry.close()
    delivered = [r for r in rows if r.state in DELIVERED_STATES]
    if delivered and at_ms is not None:
        job = delivered[0].data.get("job") or {}
        claimed = job.get("claimed_ms") or job.get("delivered_ms")
        if not isinstance(claimed, int) or at_ms < claimed:
            return ""  # written before this job was handed over: not the job's
    return delivered[0].id if delivered else ""


def _emit(ws: Workspace, job_id: str, act: Any) -> None:
    from mam.errors import JobError
    from mam.jobs.activity import body_of
    from mam.jobs.emit import Emitter
    from mam.store.registry import Registry

    body = body_of(act.state, source=act.source, tool=act.tool, message=act.message, turn_end=act.turn_end)
    registry = Registry(ws)
    try:
        Emitter(ws, registry, None).emit(job_id, "activity", body)
    except JobError:
        pass  # the job ended meanwhile: the session file is enough
    finally:
        registry.close()


def _log_error(ws: Workspace | None, session: str, error: BaseException) -> None:
    if ws is None or not session or isinstance(error, SystemExit):
        return
    try:
        folder = ws.session_dir(session)
        folder.mkdir(mode=0o700, parents=True, exist_ok=True)
        line = f"{time.strftime('%Y-%m-%dT%H:%M:%SZ', time.gmtime())} {type(error).__name__}: {error}\n"
        tb = "".join(traceback.format_exception(error)[-3:])
        fd = os.open(folder / "hook-errors.log", os.O_WRONLY | os.O_CREAT | os.O_APPEND | os.O_NOFOLLOW, 0o600)
        with os.fdopen(fd, "a", encoding="utf-8") as f:
            f.write(line + tb)
    except OSError:
        pass
