"""`mam event started|progress|heartbeat|completed|error`: the agent side of a job, declared here for `--help`.

The `mam` script runs these in its lean front end (mam.node.front): each call is one `event` request of
the node protocol, served by the workspace's node when one runs (else in the agent's own process, the
same Service): mam.jobs.emit's Emitter, the one writer of job events, signs the event with the job's token
and commits it to the workspace's store (which allocates its seq under the job's lock), then pokes the
job's key (mam.util.pokes), which wakes the job's wrapper; only when no wrapper listens is the event
published over MQTT by whoever runs it (a broker outage loses nothing: the event stays on disk, with a
warning). A report file is read by the client, from its own folder, and travels as text.
Exit codes: 0 recorded (handed to the wrapper, published, or kept on disk with a warning); 1 the job
already ended, or the event is invalid or cannot fit the wire; 2 a malformed job id or usage; 5 no such job.
"""

from __future__ import annotations

from typing import Any

import click

from mam.cli.common import served_by_front, workspace_option


@click.group("event")
def event() -> None:
    """Agent side: report on the job in your brief (the brief's footer shows the exact commands).

    \b
    Exit codes: 0 recorded (handed to the wrapper, published, or kept on disk if
    the broker is down); 1 the job already ended or the input is invalid; 2 a
    malformed job id; 5 unknown job.
    A report too big for one signed event (64 KiB) is cut, with a marker line.
    """


class _Count(click.IntRange):
    """A whole number >= 0, worded as "not a valid integer" when it is no number at all."""

    name = "integer"


job_option = click.option("--job", "job_id", required=True, help="The job id from your brief.")
json_option = click.option("--json", "as_json", is_flag=True, help="Print what was recorded as JSON.")


@event.command("started")
@workspace_option
@job_option
@click.option(
    "--nonce",
    default=None,
    help="The nonce from your brief (proves you read this brief). "
    "Without it, mam takes it from the job record and notes that in the event.",
)
@click.option(
    "--heartbeat", type=float, default=None, help="Start a heartbeat every N seconds until the job ends or you exit."
)
@json_option
def started(**_options: Any) -> None:
    """Acknowledge the brief (once), optionally starting an automatic heartbeat."""
    served_by_front()


@event.command("progress")
@workspace_option
@job_option
@click.option("--message", required=True, help="What you are doing now.")
@json_option
def progress(**_options: Any) -> None:
    """Report progress (also counts as a sign of life)."""
    served_by_front()


@event.command("heartbeat")
@workspace_option
@job_option
@json_option
def heartbeat(**_options: Any) -> None:
    """Send one heartbeat by hand (`started --heartbeat N` does it automatically)."""
    served_by_front()


@event.command("completed")
@workspace_option
@job_option
@click.option("--message", default="", help="One-line result.")
@click.option(
    "--report",
    "report",
    metavar="FILE",
    default=None,
    help="A report file to attach (its text travels with the event).",
)
@click.option(
    "--tokens",
    type=_Count(min=0),
    metavar="INTEGER RANGE",
    default=None,
    help="Tokens the job used, where your CLI keeps no usage mam can read (mam prefers the CLI's own records).",
)
@click.option(
    "--disposition",
    type=click.Choice(["done", "blocked", "review"]),
    default=None,
    help="A task's job: how the task stands (default done): blocked (with --waiting-on) or review.",
)
@click.option("--waiting-on", metavar="TASK", default=None, help="With --disposition blocked: the task it waits on.")
@json_option
def completed(**_options: Any) -> None:
    """Finish the job successfully.

    \b
    A task's job (`mam task`) may also say how its task stands: done (the default),
    review (it waits in_review for a person's `mam task done` or `reopen`), or blocked
    with --waiting-on TASK (woken again once that task is done).
    """
    served_by_front()


@event.command("error")
@workspace_option
@job_option
@click.option("--reason", required=True, help="Why you cannot finish the job.")
@json_option
def error(**_options: Any) -> None:
    """End the job as failed, with a reason."""
    served_by_front()
