"""Notifications: tell a person when something needs them or ended (`MAM_NOTIFY`).

`MAM_NOTIFY` is either an `http://` / `https://` URL (a POST of the JSON payload) or a command
(split like a shell would, run without a shell, the JSON on its stdin; exit 0 counts as sent).

`send()` never blocks and never raises: it claims the (subject, kind) pair once for the
workspace (a marker file made with O_EXCL under `.mam/notify/sent/`, so a job ended by its
wrapper and seen again by the monitor is sent once), then hands the payload to a detached sender
process over a pipe and returns. The sender tries `ATTEMPTS` times, `TIMEOUT_S` each, with
back-off, and logs each failure in `.mam/notify/notify.log` (never the target itself: a webhook
URL can hold a key). A process is used rather than a thread because the caller (a job's wrapper)
exits right after the job ends; the message must outlive it.

The payload holds only the fields in `FIELDS` (job, session, kind, state, reason, message, ...):
never a token, password or the dispatch secret.

Kinds: `job_ended`, `session_terminated`, `loop_ended`, `needs_approval` (a loop run with `--approve`
passed and waits for `mam loop approve|reject`; once per loop and round), `waiting` (an agent waits for a person:
sent by `mam hook` when that lands), `budget` (80 % of a budget, later), `paused` and `resumed` (a job: `mam job
pause|resume`, with its `mode` and `by`), `hold` (`mam pause --all`), `breaker_tripped` (a role's circuit breaker
tripped: its tasks wait until `mam role reset`) and `daily_cap_reached` (a role's task waits for tomorrow), both
with the `role` (mam/org).
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import shlex
import subprocess
import sys
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from mam.settings import Settings, load_settings
from mam.util.proc import module_argv
from mam.workspace import Workspace

log = logging.getLogger(__name__)

FIELDS = (
    "job",
    "session",
    "loop",
    "state",
    "reason",
    "message",
    "exit_code",
    "agent",
    "role",
    "tool",
    "rounds",
    "target",
    "parent_job",
    "mode",
    "by",
    "task",
    "failures",
    "day",
)
MESSAGE_MAX = 2000
ATTEMPTS = 4
BACKOFF_S = (1.0, 3.0, 9.0)
TIMEOUT_S = 10.0


def folder(ws: Workspace) -> Path:
    return ws.state / "notify"


def target_of(settings: Settings) -> str:
    return settings.notify.strip()


def payload_for(ws: Workspace, kind: str, subject: str, fields: Mapping[str, Any]) -> dict[str, Any]:
    """The JSON a target receives: the allowed fields only, the message cut to MESSAGE_MAX."""
    body: dict[str, Any] = {k: fields[k] for k in FIELDS if fields.get(k) not in (None, "")}
    if "message" in body:
        body["message"] = str(body["message"])[:MESSAGE_MAX]
    return {
        "kind": kind,
        "subject": subject,
        "workspace": str(ws.root),
        "ts": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        **body,
    }


def claim(ws: Workspace, kind: str, subject: str) -> bool:
    """True the first time (subject, kind) is claimed in this workspace, False ever after."""
    sent = folder(ws) / "sent"
    sent.mkdir(parents=True, exist_ok=True, mode=0o700)
    name = hashlib.sha256(f"{kind}\0{subject}".encode()).hexdigest()[:32]
    try:
        fd = os.open(sent / name, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except FileExistsError:
        return False
    with os.fdopen(fd, "w") as f:
        f.write(f"{kind} {subject}\n")
    return True


def send(ws: Workspace, settings: Settings | None, *, kind: str, subject: str, payload: Mapping[str, Any]) -> bool:
    """Queue one notification for (subject, kind); True if it was handed to a sender. Never raises."""
    try:
        settings = settings if settings is not None else _settings_of(ws)
        target = target_of(settings) if settings is not None else ""
        if not target or not ws.state.is_dir() or not claim(ws, kind, subject):
            return False
        job = {
            "target": target,
            "payload": payload_for(ws, kind, subject, payload),
            "log": str(folder(ws) / "notify.log"),
        }
        proc = subprocess.Popen(
            module_argv(sys.executable, "mam.notify"),
            stdin=subprocess.PIPE,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            start_new_session=True,
            close_fds=True,
        )
        assert proc.stdin is not None
        proc.stdin.write(json.dumps(job).encode())  # small: fits the pipe's buffer, so this does not wait
        proc.stdin.close()
        return True
    except Exception as e:  # a notification must never break what it reports on
        log.warning("notification %s for %s not sent: %s", kind, subject, type(e).__name__)
        return False


def _settings_of(ws: Workspace) -> Settings | None:
    """For callers that hold no settings (a job ended from outside its wrapper): the workspace's."""

    try:
        return load_settings(env_file=ws.env_file)
    except Exception:
        return None


# -- what mam notifies about ----------------------------------------------------------------------
def job_ended(ws: Workspace, settings: Settings | None, job_id: str) -> bool:
    """A job reached a terminal state (any): kind `job_ended`, subject the job id."""
    try:
        from mam.store.registry import Registry

        registry = Registry.open_existing(ws)
        if registry is None:
            return False
        try:
            row = registry.find_job(job_id)
        finally:
            registry.close()
    except Exception:
        return False
    if row is None or row.open:
        return False
    job = row.data.get("job", {})
    message = job.get("result") or job.get("detail") or ""
    return send(
        ws,
        settings,
        kind="job_ended",
        subject=job_id,
        payload={
            "job": job_id,
            "session": row.session,
            "state": row.state,
            "reason": row.reason,
            "exit_code": row.exit_code,
            "message": message,
            "target": row.target,
            "parent_job": row.parent_job,
        },
    )


def session_terminated(ws: Workspace, settings: Settings | None, name: str, note: str = "") -> bool:
    return send(
        ws,
        settings,
        kind="session_terminated",
        subject=name,
        payload={"session": name, "state": "terminated", "message": note},
    )


def loop_ended(ws: Workspace, settings: Settings | None, loop_id: str, fields: Mapping[str, Any]) -> bool:
    return send(
        ws,
        settings,
        kind="loop_ended",
        subject=loop_id,
        payload={
            "loop": loop_id,
            "session": fields.get("creator"),
            "state": fields.get("state"),
            "reason": fields.get("reason"),
            "exit_code": fields.get("exit_code"),
            "rounds": fields.get("rounds"),
            "message": fields.get("summary") or fields.get("message"),
        },
    )


def needs_approval(
    ws: Workspace, settings: Settings | None, loop_id: str, round_number: int, fields: Mapping[str, Any]
) -> bool:
    return send(
        ws,
        settings,
        kind="needs_approval",
        subject=f"{loop_id}/round-{round_number}",
        payload={
            "loop": loop_id,
            "session": fields.get("creator"),
            "state": "needs_approval",
            "rounds": round_number,
            "message": fields.get("message"),
        },
    )


def waiting(
    ws: Workspace,
    settings: Settings | None,
    session: str,
    *,
    job: str = "",
    tool: str = "",
    message: str = "",
    since: str = "",
) -> bool:
    """An agent waits for a person (a permission prompt, a question). Subject: the job (else the
    session) and when the wait began (`since`, e.g. the job's `waiting.since`), so each new wait
    is told once and a repeated hook about the same wait is not."""
    subject = f"{job or session}@{since}" if since else (job or session)
    return send(
        ws,
        settings,
        kind="waiting",
        subject=subject,
        payload={"session": session, "job": job, "state": "waiting", "tool": tool, "message": message},
    )


def breaker_tripped(
    ws: Workspace, settings: Settings | None, role: str, *, failures: int, since: float, task: str = "", job: str = ""
) -> bool:
    """A role's circuit breaker tripped (mam/org): its tasks are held until `mam role reset`. Subject: the role
    and when it tripped, so each trip is told once."""
    return send(
        ws,
        settings,
        kind="breaker_tripped",
        subject=f"{role}@{since:.3f}",
        payload={
            "role": role,
            "task": task,
            "job": job,
            "state": "tripped",
            "failures": failures,
            "message": f"{failures} failed jobs in a row: its tasks wait until `mam role reset {role}`",
        },
    )


def daily_cap_reached(ws: Workspace, settings: Settings | None, role: str, *, day: str, cap: str) -> bool:
    """A task of `role` waits for tomorrow: a daily run cap is reached (mam/org). Once per role and local day."""
    return send(
        ws,
        settings,
        kind="daily_cap_reached",
        subject=f"{role}@{day}",
        payload={"role": role, "state": "daily_cap", "day": day, "message": cap},
    )


# -- the detached sender ----------------------------------------------------------------------------
def deliver(target: str, payload: Mapping[str, Any], timeout: float = TIMEOUT_S) -> None:
    """One attempt; raises on failure (HTTP status >= 300, a command's non-zero exit, a timeout)."""
    data = json.dumps(payload, sort_keys=True, ensure_ascii=False).encode()
    if target.startswith(("http://", "https://")):
        import urllib.request

        req = urllib.request.Request(target, data=data, method="POST", headers={"Content-Type": "application/json"})
        with urllib.request.urlopen(req, timeout=timeout) as resp:
            if resp.status >= 300:
                raise OSError(f"HTTP {resp.status}")
        return

    argv = shlex.split(target)
    proc = subprocess.run(argv, input=data, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, timeout=timeout)
    if proc.returncode != 0:
        raise OSError(f"the command exited {proc.returncode}")


def describe_target(target: str) -> str:
    """For the log: the scheme and host of a URL, the program of a command (never a URL's path or query)."""
    if target.startswith(("http://", "https://")):
        parts = urlsplit(target)
        return f"{parts.scheme}://{parts.hostname}" + (f":{parts.port}" if parts.port else "")

    try:
        return os.path.basename(shlex.split(target)[0])
    except (ValueError, IndexError):
        return "a command"


def _log(path: str, text: str) -> None:
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
        with os.fdopen(fd, "a", encoding="utf-8") as f:
            f.write(f"{time.strftime('%Y-%m-%dT%H:%M:%SZ', time.gmtime())} {text}\n")
    except OSError:
        pass  # the workspace may be gone (a demo's), or the disk full: nothing to tell anyone


def sender_main(job: Mapping[str, Any]) -> int:
    target, payload, log_path = str(job["target"]), job["payload"], str(job["log"])
    what = f"{payload.get('kind')} {payload.get('subject')} to {describe_target(target)}"
    for attempt in range(1, ATTEMPTS + 1):
        try:
            deliver(target, payload)
            _log(log_path, f"sent {what} (attempt {attempt})")
            return 0
        except Exception as e:
            reason = "timed out" if isinstance(e, subprocess.TimeoutExpired) else f"{type(e).__name__}: {e}"
            _log(log_path, f"attempt {attempt} of {ATTEMPTS} failed for {what}: {reason}"[:500])
        if attempt < ATTEMPTS:
            time.sleep(BACKOFF_S[min(attempt - 1, len(BACKOFF_S) - 1)])
    _log(log_path, f"gave up on {what}")
    return 1


if __name__ == "__main__":
    sys.exit(sender_main(json.loads(sys.stdin.buffer.read())))
