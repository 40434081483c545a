"""`mam job delegate|status|list|log|cancel`."""

from __future__ import annotations

import click

from mam.cli.common import App, echo, echo_json, existing_registry, open_registry, read_brief, workspace_option
from mam.cli.fanout import fanout
from mam.cli.replay import replay
from mam.errors import UsageError
from mam.ids import check_job_id
from mam.jobs.delegate import RemoteOrigin, Update, delegate_request
from mam.jobs.delegate import delegate as run_delegate
from mam.jobs.outcomes import JobState
from mam.jobs.queries import cancel as cancel_job
from mam.jobs.queries import log, workspace_jobs
from mam.jobs.queries import status as job_status
from mam.jobs.target import parse_target
from mam.util.text import json_text

DELEGATE_HELP = """Delegate a brief to a session and wait for the job to end.

\b
TARGET is tmux:NAME, herdr:NAME, remote:RUNNER/NAME or a bare session NAME.
The brief is injected once, with a footer telling the agent the exact
`mam event` commands to run. The job ends only by the agent's events or a deadline.

\b
Exit codes:
  0  completed (prints the result; --json prints the final record)
  1  failed: the agent reported an error, or no `started` within --start-deadline (agent_blocked),
     or a remote runner refused to paste the brief (brief_refused)
  2  no event for K x N seconds (deadline_timeout) or the --timeout budget spent (wall_clock_timeout)
  3  broker unavailable and no terminal status on disk
  5  not delivered: session busy (session_busy), target not found, a cap kept it queued past
     --dispatch-wait (queue_timeout), or the job was taken over by another attempt
  6  a token budget: refused at once, a budget being spent (budget_exhausted; never delivered), or
     stopped when its measured usage passed --max-tokens (token_budget; its turn interrupted)

\b
Caps (see `mam budget --help`): over MAM_MAX_RUNNING_JOBS or MAM_MAX_RUNNING_JOBS_<ROLE>, or while a
token budget waits for reservations in flight, the job is `queued` and starts in order when it fits.

\b
With --idempotency-key K (or --dedup: K = sha256 of the target session and the brief), a job that
already has K (made less than MAM_IDEMPOTENCY_TTL_S ago, or still open) is not made again and nothing
is injected: this call attaches to it, waits for its end and exits with its exit code.
"""


@click.group("job")
def job() -> None:
    """Jobs: delegate a brief to a session and follow it; inspect and cancel jobs."""


@job.command("delegate", help=DELEGATE_HELP)
@workspace_option
@click.option("--target", required=True, help="tmux:NAME, herdr:NAME, remote:RUNNER/NAME, or NAME.")
@click.option("--brief", default=None, help="The brief text.")
@click.option(
    "--brief-file",
    type=click.Path(dir_okay=False, allow_dash=True),
    default=None,
    help="Read the brief from a file ('-': stdin).",
)
@click.option("--timeout", type=float, default=None, help="Wall-clock budget in seconds (default MAM_JOB_TIMEOUT_S).")
@click.option(
    "--start-deadline", type=float, default=None, help="Seconds to wait for `started` (default MAM_START_DEADLINE_S)."
)
@click.option(
    "--heartbeat",
    type=float,
    default=None,
    help="Heartbeat interval N the agent is asked for (default MAM_HEARTBEAT_S).",
)
@click.option("--parent-job", default=None, help="Link this job as a sub-job of that job (a job of this workspace).")
@click.option(
    "--job-id", default=None, help="Use this job id; if it exists, attach to it instead (never injects twice)."
)
@click.option(
    "--idempotency-key",
    default=None,
    help="If a job with this key exists (MAM_IDEMPOTENCY_TTL_S), attach to it: wait for it, exit with its code. "
    "Only for the same target and brief: else exit 2 naming the key's job.",
)
@click.option("--dedup", is_flag=True, help="Use sha256(target session, brief) as the idempotency key.")
@click.option(
    "--dispatch-wait",
    type=float,
    default=None,
    help="Seconds to wait for the session's earlier jobs and, queued, for a cap (default MAM_DISPATCH_WAIT_S).",
)
@click.option(
    "--max-tokens",
    type=click.IntRange(min=1),
    default=None,
    help="Stop the job (exit 6) once its measured token usage passes N; also caps its reservation.",
)
@click.option(
    "--estimate-tokens",
    type=click.IntRange(min=0),
    default=None,
    help="Tokens to reserve against the budgets (default: the median of the role's last 20 completed jobs, "
    "else MAM_DEFAULT_ESTIMATE_TOKENS).",
)
@click.option(
    "--allow-insecure-broker",
    is_flag=True,
    help="Allow remote: dispatch on a broker with neither TLS nor authentication.",
)
@click.option("--follow/--quiet", default=False, help="Print each transition and progress message to stderr.")
@click.option("--json", "as_json", is_flag=True, help="Print the final job record as JSON.")
@click.pass_obj
def delegate(
    app: App,
    target: str,
    brief: str | None,
    brief_file: str | None,
    timeout: float | None,
    start_deadline: float | None,
    heartbeat: float | None,
    parent_job: str | None,
    job_id: str | None,
    idempotency_key: str | None,
    dedup: bool,
    dispatch_wait: float | None,
    max_tokens: int | None,
    estimate_tokens: int | None,
    allow_insecure_broker: bool,
    follow: bool,
    as_json: bool,
) -> int:

    # Ids first: a bad one must leave nothing behind, not even the registry that open_registry creates.
    for value in (job_id, parent_job):
        if value is not None:
            check_job_id(value)
    if brief is not None and brief_file is not None:
        raise UsageError("give exactly one of --brief or --brief-file")
    text = brief if brief is not None else read_brief(brief_file) if brief_file else None
    req = delegate_request(
        target=target,
        brief=text,
        timeout_s=timeout,
        start_deadline_s=start_deadline,
        heartbeat_s=heartbeat,
        parent_job=parent_job,
        job_id=job_id,
        idempotency_key=idempotency_key,
        dedup=dedup,
        dispatch_wait_s=dispatch_wait,
        max_tokens=max_tokens,
        estimate_tokens=estimate_tokens,
        allow_insecure_broker=allow_insecure_broker,
    )
    remote: RemoteOrigin | None = None
    if parse_target(req.target).remote:  # only a remote job pays for importing its origin side
        from mam.remote.origin import ORIGIN

        remote = ORIGIN
    out = run_delegate(
        req,
        ws=app.ws,
        settings=app.settings,
        registry=open_registry(app),
        on_update=_printer() if follow else None,
        remote=remote,
        on_attach=_attached,
    )
    if as_json:
        echo_json(out.as_dict())
    elif out.state == JobState.COMPLETED:
        echo(out.result or "(completed)")
        if out.report:
            echo(out.report)
    else:
        echo(f"job {out.job_id}: {out.state} ({out.reason}){': ' + out.detail if out.detail else ''}", err=True)
    return out.exit_code


def _attached(job_id: str, still_open: bool) -> None:
    echo(f"attached to job {job_id} (same idempotency key){': waiting' if still_open else ''}", err=True)


def _printer() -> Update:
    def show(job, inp) -> None:  # type: ignore[no-untyped-def]
        body = getattr(inp, "body", {}) or {}
        extra = f": {body['message']}" if body.get("message") else ""
        reason = f" {job.reason}" if job.reason else ""
        what = type(inp).__name__.lower() + (f" {inp.type}" if hasattr(inp, "type") else "")
        echo(f"[{job.id}] {job.state.value}{reason} ({what}){extra}", err=True)

    return show


@job.command("status")
@workspace_option
@click.argument("job_id")
@click.option("--json", "as_json", is_flag=True, help="Print the job record as JSON.")
@click.pass_obj
def status(app: App, job_id: str, as_json: bool) -> None:
    """Show one job (and its sub-jobs). Exit 5 if there is no such job."""

    view = job_status(existing_registry(app, job_id), job_id)
    if as_json:
        echo_json(view)
        return
    echo(
        f"{view['id']}: {view['state']}{' (' + view['reason'] + ')' if view['reason'] else ''} session "
        f"{view['session']} exit {view['exit_code']}"
    )
    for child in view["children"]:
        echo(f"  sub-job {child['id']}: {child['state']} {child['reason']}")


@job.command("list")
@workspace_option
@click.option("--session", default=None, help="Only this session's jobs.")
@click.option("--state", default=None, help="Only jobs in this state.")
@click.option("--parent-job", default=None, help="Only sub-jobs of this job.")
@click.option("--open", "open_only", is_flag=True, help="Only open jobs.")
@click.option("--limit", type=int, default=50, show_default=True)
@click.option("--json", "as_json", is_flag=True, help="Print a JSON list.")
@click.pass_obj
def list_(
    app: App, session: str | None, state: str | None, parent_job: str | None, open_only: bool, limit: int, as_json: bool
) -> None:
    """List recent jobs, newest first."""

    rows = workspace_jobs(app.ws, session=session, state=state, parent=parent_job, open_only=open_only, limit=limit)
    if as_json:
        echo_json(rows)
        return
    for r in rows:
        echo(f"{r['id']}  {r['state']:<10} {r['reason'] or '-':<20} {r['session']}")
    if not rows:
        echo("no jobs")


@job.command("log")
@workspace_option
@click.argument("job_id")
@click.option("--json", "as_json", is_flag=True, help="Print the audit log as a JSON list.")
@click.pass_obj
def log_(app: App, job_id: str, as_json: bool) -> None:
    """Print a job's audit log: every transition and every event received or rejected."""

    lines = log(app.ws, existing_registry(app, job_id), job_id)
    if as_json:
        echo_json(lines)
        return
    for line in lines:
        rest = {k: v for k, v in line.items() if k not in ("ts_ms", "kind", "pid")}
        echo(f"{line.get('ts_ms')} {line.get('kind')} {json_text(rest)}")


@job.command("cancel")
@workspace_option
@click.argument("job_id")
@click.option("--json", "as_json", is_flag=True, help="Print the job record as JSON.")
@click.pass_obj
def cancel(app: App, job_id: str, as_json: bool) -> None:
    """Cancel an open job (its wrapper then exits 5). Exit 1 if it already ended, 5 if unknown."""

    view = cancel_job(app.ws, existing_registry(app, job_id), job_id)
    if as_json:
        echo_json(view)
    else:
        echo(f"{job_id}: cancelled")


# `mam job fanout` and `mam job replay` live in modules of their own.
job.add_command(fanout)
job.add_command(replay)
