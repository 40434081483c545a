"""A delegation handed over as a command line: `mam job delegate ... --json` run for a library caller (the
MCP server, a loop), and what it printed read back.

The caller supplies how a command runs (`Run`: mam.node.call.run, which hands it to the workspace's node
as the thin client does, or runs it in the caller's process when no node may). This module only builds
the command line from a request (mam.jobs.delegate.command_line) and reads the answer: the final record
(`--json`) as an Outcome; a `--detach`ed job's id and state once its brief is delivered; or, when the
command printed no record, its one-line error and exit code as DelegationFailed (what the CLI says).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol

from mam.errors import DelegationFailed
from mam.jobs.delegate import DelegateRequest, command_line
from mam.jobs.result import Outcome, outcome_from_dict
from mam.outcomes import Exit

OnJob = Callable[[str], None]


@dataclass(frozen=True)
class Answer:
    """A command's end: its exit code and what it printed."""

    code: int
    stdout: str
    stderr: str


class Run(Protocol):
    """Runs `mam --workspace ROOT <args>` (a command the node serves) for the caller; `on_job` is told the
    job the command drives once it is registered (or attached to)."""

    def __call__(self, args: list[str], *, on_job: OnJob | None = None) -> Answer: ...


@dataclass(frozen=True)
class Delivered:
    """A `--detach`ed delegation's answer: its brief is delivered (or its idempotency key named another
    call's job, `job_id`), and the job is open in `state`."""

    job_id: str
    state: str


def delegate_args(req: DelegateRequest) -> list[str]:
    return ["job", "delegate", *command_line(req), "--json"]


def delegated(run: Run, req: DelegateRequest, *, on_job: OnJob | None = None) -> Outcome | Delivered:
    """Run `req` as `mam job delegate --json`: its outcome, or (`req.detach`) Delivered while the job runs
    on; DelegationFailed when it printed no record."""
    return read(run(delegate_args(req), on_job=on_job))


def to_its_end(run: Run, req: DelegateRequest, *, on_job: OnJob | None = None) -> Outcome:
    """Run `req` (not detached) as `mam job delegate --json`: the job's outcome; DelegationFailed when it printed
    no final record."""
    got = delegated(run, req, on_job=on_job)
    if isinstance(got, Delivered):
        said = f"mam job delegate answered before job {got.job_id} ended ({got.state})"
        raise DelegationFailed(said, exit_code=Exit.FAILED)
    return got


def read(answer: Answer) -> Outcome | Delivered:
    """The record the command printed last, as an Outcome (or Delivered: `{"id", "state"}` of a job left
    running); DelegationFailed with its error line and exit code when it printed none."""
    record = _last_object(answer.stdout)
    if record is None:
        raise DelegationFailed(error_line(answer), exit_code=answer.code)
    if set(record) == {"id", "state"}:
        return Delivered(str(record["id"]), str(record["state"]))
    return outcome_from_dict(record)


def error_line(answer: Answer) -> str:
    """What the command said was wrong: its `mam: error: ...` line (without the prefix), as the MCP tools
    and a loop's log repeat it."""
    lines = [line.strip() for line in answer.stderr.splitlines() if line.strip()]
    errors = [line.removeprefix("mam: error: ") for line in lines if line.startswith("mam: error: ")]
    if errors:
        return errors[-1]
    return lines[-1] if lines else f"mam job delegate exited {answer.code} and printed no record"


def _last_object(text: str) -> dict[str, Any] | None:
    """The last JSON object in `text` (a command the node ran again after a node died may print twice)."""
    decoder, found, at = json.JSONDecoder(), None, 0
    while True:
        while at < len(text) and text[at].isspace():
            at += 1
        if at >= len(text):
            return found
        try:
            obj, at = decoder.raw_decode(text, at)
        except ValueError:
            return found
        if isinstance(obj, dict):
            found = obj
