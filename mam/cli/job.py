"""`mam job delegate|wait|status|list|log|cancel|send`."""

from __future__ import annotations

import time
from typing import Any

import click

from mam.cli.common import App, echo, echo_json, existing_registry, node_value, served_by_front, workspace_option
from mam.cli.fanout import fanout
from mam.cli.replay import replay
from mam.cli.request_options import request_options
from mam.jobs.queries import log, workspace_jobs
from mam.jobs.queries import status as job_status
from mam.outcomes import Exit

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
  130  interrupted (SIGINT, Ctrl-C): the job stays open and this prints `job ID is still running;
       follow it with: mam job wait ID` on stderr (still waiting for its turn, it is handed to a
       background follower that types it once, in its turn; `mam job cancel ID` drops it)
  143  interrupted by SIGTERM, as 130
  129  interrupted by SIGHUP, as 130

\b
With --detach the call returns once the brief is delivered: it prints the job id (--json:
{"id": ..., "state": ...}) and exits 0; `mam job wait ID` follows the job later.

\b
Caps (see `mam budget --help`): over MAM_MAX_RUNNING_JOBS or MAM_MAX_RUNNING_JOBS_<ROLE>, or while a
token budget waits for reservations in flight, the job is `queued` and starts in order when it fits.

\b
With --idempotency-key K (or --dedup: K = sha256 of the target session and the brief), a job that
already has K (made less than MAM_IDEMPOTENCY_TTL_S ago, or still open) is not made again and nothing
is injected: this call attaches to it, waits for its end and exits with its exit code.

\b
What is printed where:
  stderr  first the job id, one line, as soon as the job is registered; then, on a terminal, a
          live status line (state, last event, deadlines; while the job waits for its turn, the
          job ahead of it and its session, or the workspace's hold: who placed it, since when, and
          `mam resume --all`) that is cleared before any other line and at the end (--quiet:
          none; --follow: every transition and progress message, one a line instead); at the
          end, for a job that did not complete, one line: its id, state, reason and detail
  stdout  only the outcome: the agent's result (and report) when it completed, or with --json
          the final job record, whatever the end (--detach: the job id once the brief is delivered)
"""


@click.group("job")
def job() -> None:
    """Jobs: delegate a brief to a session and follow it; send it a follow-up; inspect and cancel jobs."""


@job.command("delegate", help=DELEGATE_HELP)
@workspace_option
@request_options()
@click.option(
    "--follow/--quiet",
    default=None,
    help="--follow: print each transition and progress message to stderr, one a line. --quiet: print only "
    "the job id there (default: on a terminal, a live status line that is cleared at the end).",
)
@click.option("--json", "as_json", is_flag=True, help="Print the final job record as JSON.")
def delegate(**_options: Any) -> int:
    """Run by mam.node.front (the options are declared for this help): see `served_by_front`."""
    return served_by_front()


WAIT_HELP = f"""Wait until job JOB_ID ends; print its end as `mam job delegate` does and exit with its code.

\b
While waiting it follows the job as its owner would: if the process that started the job is gone
(interrupted, detached, killed), it takes the job over as `mam job delegate --job-id` does (the
events the agent stored meanwhile first, then the job's deadlines) and never types the brief.
A job already ended is reported at once. On a terminal it keeps the live status line `delegate`
keeps on stderr (cleared before any other line and at the end).

\b
Exit codes: the job's own (0 completed, 1 failed, 2 timed out, 3, 5, 6: see `mam job delegate
--help`); 2 also for an unknown job id (nothing is written); {Exit.STILL_RUNNING} when --timeout passed
first (the job stays open: `job ID is still running; follow it with: mam job wait ID` on stderr;
--json prints {{"id": ..., "state": ...}}); 130, 143, 129 when interrupted (the job stays open).
"""


@job.command("wait", help=WAIT_HELP)
@workspace_option
@click.argument("job_id")
@click.option("--timeout", type=float, default=None, help="Give up after S seconds (exit 124); the job stays open.")
@click.option("--json", "as_json", is_flag=True, help="Print the final job record as JSON.")
def wait(**_options: Any) -> int:
    """Run by mam.node.front (the options are declared for this help)."""
    return served_by_front()


@job.command("status")
@workspace_option
@click.argument("job_id")
@click.option("--json", "as_json", is_flag=True, help="Print the job record as JSON.")
@click.pass_obj
def status(app: App, job_id: str, as_json: bool) -> None:
    """Show one job (and its sub-jobs): `ID: STATE (REASON) session NAME exit CODE` (an open job has no
    exit code yet: none is shown). Exit 5 if there is no such job."""

    view = job_status(existing_registry(app, job_id), job_id)
    if as_json:
        echo_json(view)
        return
    ended = f" exit {view['exit_code']}" if view["exit_code"] is not None else ""  # an open job has none yet
    echo(
        f"{view['id']}: {view['state']}{' (' + view['reason'] + ')' if view['reason'] else ''} session "
        f"{view['session'] or '-'}{ended}"
    )
    for child in view["children"]:
        echo(f"  sub-job {child['id']}: {child['state']}{' (' + child['reason'] + ')' if child['reason'] else ''}")


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
    """List recent jobs, newest first: id, state, reason, session and age (--json: every field)."""

    rows = workspace_jobs(app.ws, session=session, state=state, parent=parent_job, open_only=open_only, limit=limit)
    if as_json:
        echo_json(rows)
        return
    if not rows:
        echo("no jobs")
        return
    from mam.cli.tables import age, table

    now = time.time()
    echo(
        table(
            ("ID", "STATE", "REASON", "SESSION", "AGE"),
            [(r["id"], r["state"], r["reason"] or "-", r["session"], age(now - r["created_ms"] / 1000)) for r in rows],
        )
    )


@job.command("log")
@workspace_option
@click.argument("job_id")
@click.option("--json", "as_json", is_flag=True, help="Print the audit log as a JSON list.")
@click.pass_obj
def log_(app: App, job_id: str, as_json: bool) -> None:
    """Print a job's audit log: every transition and every event received or rejected.

    One line each: the local time (ISO 8601), the kind, what came in (an event's type, sender and
    seq), the state it left the job in, and the other fields as key=value. --json: the log as stored.
    """

    lines = log(app.ws, existing_registry(app, job_id), job_id)
    if as_json:
        echo_json(lines)
        return
    from mam.cli.tables import log_rows, table

    echo(table(("TIME", "KIND", "WHAT", "STATE", "FIELDS"), log_rows(lines)))


@job.command("cancel")
@workspace_option
@click.argument("job_id")
@click.option(
    "--no-interrupt",
    is_flag=True,
    help="Only end the job: the agent finishes its turn (the session's next brief waits behind it).",
)
@click.option("--json", "as_json", is_flag=True, help="Print the job record as JSON.")
@click.pass_obj
def cancel(app: App, job_id: str, no_interrupt: bool, as_json: bool) -> None:
    """Cancel an open job: its agent's turn is interrupted, then the job ends cancelled.

    The agent's turn on the job is stopped with its CLI's interrupt keys (Escape; as `mam job pause
    --mode quick` does): the agent is not exited and keeps its conversation, and the session's next
    job is typed once the job has ended. Nothing is pressed for a job whose brief was never typed
    (it is only dropped), whose agent's hooks say it is idle, or that runs on another host.
    --no-interrupt: only end the job; the agent finishes its turn, and the session's next brief waits
    in its input until then. The job's wrapper (`mam job delegate`, `mam job wait`) then exits 5.

    Exit codes: 0 cancelled; 1 it already ended; 2 a bad id; 5 no such job.
    """

    args: dict[str, object] = {"job": job_id}
    if no_interrupt:
        args["no_interrupt"] = True
    view = node_value(app, "cancel", args)
    if as_json:
        echo_json(view)
    else:
        echo(f"{job_id}: cancelled")


BY_HELP = "Who asks, for the audit log (default: user@host)."


@job.command("pause")
@workspace_option
@click.argument("job_id")
@click.option(
    "--mode",
    type=click.Choice(["safe", "quick", "hard"]),
    default="safe",
    show_default=True,
    help="safe: the agent finishes its turn; quick: its turn is interrupted now (its CLI's interrupt keys); "
    "hard: as quick, then the agent is stopped with its conversation kept (relaunched by the resume, or, if the "
    "job ends paused, by the session's next job).",
)
@click.option("--by", default=None, help=BY_HELP)
@click.option("--json", "as_json", is_flag=True, help="Print the job record as JSON (with `paused`).")
@click.pass_obj
def pause(app: App, job_id: str, mode: str, by: str | None, as_json: bool) -> None:
    """Pause an open job: nothing more is typed into its session, and its deadlines stop, until `mam job resume`.

    A job not yet delivered is not delivered. The agent's own events still count (a turn it finishes with
    `completed` ends the job). A pause only escalates: safe, then quick, then hard; the same mode again
    changes nothing. The `mam job delegate` waiting on the job keeps waiting.

    \b
    Exit codes: 0 paused; 2 a bad id, or a lower mode than the job's pause; 5 no such job, it already
    ended, or it runs on another host.
    """
    view = node_value(app, "pause", {"job": job_id, "mode": mode, "by": by})
    if as_json:
        echo_json(view)
    else:
        echo(f"{job_id}: paused ({(view.get('paused') or {}).get('mode', mode)})")


@job.command("resume")
@workspace_option
@click.argument("job_id")
@click.option("--by", default=None, help=BY_HELP)
@click.option("--json", "as_json", is_flag=True, help="Print the job record as JSON.")
@click.pass_obj
def resume(app: App, job_id: str, by: str | None, as_json: bool) -> None:
    """Resume a paused job.

    A job paused before its brief was typed waits for its turn again. Otherwise its agent is relaunched
    with its conversation if a hard pause stopped it, and one short resume brief is typed (the job id, a
    new nonce, the commands to report with); the job then needs a fresh `started` within its start
    deadline, and what was left of its wall-clock budget runs on.

    \b
    Exit codes: 0 resumed; 2 a bad id; 5 no such job, it is not paused, or its agent could not be
    reached (it stays paused).
    """
    view = node_value(app, "resume", {"job": job_id, "by": by})
    if as_json:
        echo_json(view)
    else:
        echo(f"{job_id}: resumed ({view['state']})")


SEND_HELP = """Type TEXT into the input box of job ID's agent: a follow-up while it works.

\b
Only to a job that is running (its agent sent `started`) in a pane of this host, and only while
its agent runs, its input box is empty and no dialog or permission prompt shows: then TEXT is
pasted once and Enter pressed. TEXT is checked like a brief: not empty, at most 256 KiB, UTF-8,
no control character but tab, CR and LF. Each send is a line of the job's audit log (`sent`:
--by, the pane, the bytes and SHA-256 of TEXT, never TEXT itself), shown by `mam tail`. Nothing
else changes: the job still ends only by its events and deadlines.

\b
Exit codes:
  0  sent: prints `ID: sent` (--json: id, sent, session, by, pane, bytes, sha256)
  2  a bad job id, TEXT or --by, or a remote job (its pane is on the runner's host: send it
     there); nothing typed
  5  no such job; the job is not running (not started yet, or ended); its session or agent is
     gone; its input box is not empty, or a dialog shows; nothing typed
"""


@job.command("send", help=SEND_HELP)
@workspace_option
@click.argument("job_id", metavar="ID")
@click.option("--text", required=True, help="The text to type (checked like a brief).")
@click.option("--by", default=None, help="Who asks, for the audit log (default: user@host).")
@click.option("--json", "as_json", is_flag=True, help="Print what was sent (never the text) as JSON.")
@click.pass_obj
def send(app: App, job_id: str, text: str, by: str | None, as_json: bool) -> None:
    sent = node_value(app, "send", {"job": job_id, "text": text, "by": by})
    if as_json:
        echo_json(sent)
    else:
        echo(f"{job_id}: sent")


# `mam job fanout` and `mam job replay` live in modules of their own.
job.add_command(fanout)
job.add_command(replay)
