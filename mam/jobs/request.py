"""The delegate request's options, declared once: their names, types, defaults, help and checks.

`mam job delegate`'s options (mam/cli/request_options.py), the MCP tool `job_delegate`'s parameters
(mam/mcp/server.py) and the request `delegate_request` builds (mam/jobs/delegate.py) all come from
`OPTIONS`; tests/unit/test_request_options.py holds them to it. A field of `DelegateRequest` that is not
an option (`follow_s`) is set by library callers only. `kind` is on the CLI for the library callers that
hand their jobs to the node as `mam job delegate` (a loop's jobs, mam.loop.jobs), not offered over MCP.

Options that only change what the CLI prints or where the brief is read from stay declared in the CLI:
`--brief-file` (another way to give `brief`), `--follow/--quiet` and `--json` (presentation). `wait` is
the MCP tool's own (whether the call returns at delivery or at the end; `--detach` is the CLI's).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from mam.errors import UsageError
from mam.settings import positive_seconds


@dataclass(frozen=True)
class Option:
    """One option of a delegation.

    `name`: the request field and the MCP parameter. `kind`: str, bool, int (a number of tokens) or
    float (seconds). `flag`: its CLI spelling ("": not on the CLI). `mcp`: offered by the MCP tool.
    `default`: the text that says where an unset value's default comes from; `setting`: the settings key
    it names, if any. `least`: an int's smallest value; a float's is 0 with `least=0`, else it must be a
    positive number of seconds (at least a millisecond). `request`: a field of `DelegateRequest` (else an
    input `delegate_request` turns into one: `dedup` becomes the idempotency key)."""

    name: str
    kind: type
    help: str
    flag: str = ""
    mcp: bool = True
    default: str = ""
    setting: str = ""
    least: int | None = None
    required: bool = False
    request: bool = True

    @property
    def help_text(self) -> str:
        """The help as the CLI and the MCP tool show it: the text, and where its default comes from."""
        return f"{self.help} (default {self.default})." if self.default else f"{self.help}."


OPTIONS: tuple[Option, ...] = (
    Option("target", str, "tmux:NAME, herdr:NAME, remote:RUNNER/NAME, or NAME", flag="--target", required=True),
    # The CLI spells it --brief or --brief-file (mam.cli.common.brief_options); needed unless job_id names a job.
    Option("brief", str, "The brief text", flag="--brief", required=True),
    Option(
        "timeout_s",
        float,
        "Wall-clock budget in seconds",
        flag="--timeout",
        default="MAM_JOB_TIMEOUT_S",
        setting="MAM_JOB_TIMEOUT_S",
    ),
    Option(
        "start_deadline_s",
        float,
        "Seconds to wait for `started`",
        flag="--start-deadline",
        default="MAM_START_DEADLINE_S",
        setting="MAM_START_DEADLINE_S",
    ),
    Option(
        "heartbeat_s",
        float,
        "Heartbeat interval N the agent is asked for",
        flag="--heartbeat",
        default="MAM_HEARTBEAT_S",
        setting="MAM_HEARTBEAT_S",
    ),
    Option("parent_job", str, "Link this job as a sub-job of that job (a job of this workspace)", flag="--parent-job"),
    Option(
        "job_id",
        str,
        "Use this job id; if that job exists and is open, take it over and follow it (a brief already typed is "
        "never typed again; one not typed yet needs the same --brief, and the job's own target)",
        flag="--job-id",
    ),
    Option(
        "idempotency_key",
        str,
        "If a job with this key exists (MAM_IDEMPOTENCY_TTL_S), attach to it: wait for it, exit with its code. "
        "Only for the same target and brief: else exit 2 naming the key's job",
        flag="--idempotency-key",
    ),
    Option("dedup", bool, "Use sha256(target session, brief) as the idempotency key", flag="--dedup", request=False),
    Option(
        "dispatch_wait_s",
        float,
        "Seconds to wait for the session's earlier jobs and, queued, for a cap",
        flag="--dispatch-wait",
        default="MAM_DISPATCH_WAIT_S",
        setting="MAM_DISPATCH_WAIT_S",
        least=0,
    ),
    Option(
        "max_tokens",
        int,
        "Stop the job (exit 6) once its measured token usage passes N; also caps its reservation",
        flag="--max-tokens",
        least=1,
    ),
    Option(
        "estimate_tokens",
        int,
        "Tokens to reserve against the budgets",
        flag="--estimate-tokens",
        default="the median of the role's last 20 completed jobs, else MAM_DEFAULT_ESTIMATE_TOKENS",
        setting="MAM_DEFAULT_ESTIMATE_TOKENS",
        least=0,
    ),
    # Not offered over MCP: a tool call may not lower the transport's security for a remote dispatch.
    Option(
        "allow_insecure_broker",
        bool,
        "Allow remote: dispatch on a broker with neither TLS nor authentication",
        flag="--allow-insecure-broker",
        mcp=False,
    ),
    # What the job is for, in its record: a loop's jobs (mam.loop.jobs) are handed to the node with theirs.
    Option(
        "kind",
        str,
        "What the job is for, recorded with it (a loop's jobs: loop-plan, loop-create, loop-review, loop-fix...)",
        flag="--kind",
        mcp=False,
        default="job",
    ),
    # The MCP tool always returns once the brief is delivered (its `wait` follows the job to its end).
    Option(
        "detach",
        bool,
        "Return once the brief is delivered: print the job id (exit 0); follow it with `mam job wait ID`",
        flag="--detach",
        mcp=False,
    ),
)
BY_NAME = {o.name: o for o in OPTIONS}


def check_values(values: dict[str, object]) -> None:
    """UsageError naming the CLI flag for a number outside what its option allows (None: unset)."""
    for name, value in values.items():
        opt = BY_NAME.get(name)
        if opt is None or value is None:
            continue
        if opt.kind is int and (isinstance(value, bool) or not isinstance(value, int) or value < (opt.least or 0)):
            raise UsageError(f"{opt.flag} must be a whole number of tokens, {opt.least or 0} or more")
        if opt.kind is float:
            if isinstance(value, bool) or not isinstance(value, (int, float)):
                raise UsageError(f"{opt.flag} must be a number of seconds (got {value!r})")
            if opt.least is None:
                positive_seconds(float(value), opt.flag)
            elif not (math.isfinite(value) and value >= opt.least):
                raise UsageError(f"{opt.flag} must be a finite number of seconds, {opt.least} or more (got {value})")
