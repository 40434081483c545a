"""`mam tail`: follow the workspace's job transitions, events and loop steps, one line each."""

from __future__ import annotations

import sys

import click

from mam.cli.common import App, echo, workspace_option
from mam.ids import check_job_id
from mam.outcomes import Exit
from mam.util import interrupts
from mam.util.text import json_text


@click.command("tail")
@workspace_option
@click.option(
    "--json", "as_json", is_flag=True, help="One JSON object per line (ts, job, session, kind, type, seq, message)."
)
@click.option("--job", "job_id", metavar="ID", help="Only this job's lines.")
@click.option("--session", metavar="NAME", help="Only the lines of this session's jobs (and its loop steps).")
@click.option("--since", type=click.IntRange(min=0), metavar="SEQ", help="Start after event number SEQ of each job.")
@click.option("--all", "everything", is_flag=True, help="Start from the beginning of the history.")
@click.pass_obj
def tail(app: App, as_json: bool, job_id: str | None, session: str | None, since: int | None, everything: bool) -> int:
    """Follow, live, every job transition and event of the workspace, loop steps and session forks.

    Prints the last 10 lines of history (everything with --all, or every line after
    event SEQ of each job with --since SEQ), then one line per new thing: time, session,
    job, what happened (an event type, `-> state` for a transition, `loop <step>`,
    `session fork` with who asked), the
    event number `#seq` it follows, and the message. Transitions carry the seq of the
    last event applied before them, so a job's lines read in order.

    It follows the broker and reads what happened from the registry. With the broker
    down it says so (on stderr) and follows the registry alone, trying the broker again
    every 10 s. It never starts a
    broker, a pane or a session. Ctrl-C ends it with exit 130.

    \b
    Examples:
      mam tail
      mam tail --json --job job-0123456789abcdef --all
      mam tail --session dev-1
    """
    if since is not None and everything:
        raise click.UsageError("--since and --all are alternatives: give one")
    from mam.view.tail import Note, Tail

    if job_id:
        check_job_id(job_id)

    def sink(item: object) -> None:
        if isinstance(item, Note):
            echo(f"mam: {item.message}", err=True)
        elif as_json:
            click.echo(json_text(item.as_json()))  # type: ignore[attr-defined]
        else:
            echo(item.text())  # type: ignore[attr-defined]
        sys.stdout.flush()

    follower = Tail(app.ws, app.settings, sink, job=job_id, session=session, since=since, everything=everything)
    try:
        with interrupts.noted(follower.interrupt) as ctrl_c:  # the loop ends at its next look (mam.view.tail)
            follower.run()
    finally:
        follower.close()
    return Exit.INTERRUPTED if ctrl_c.interrupted else Exit.OK  # as every long-running command: Ctrl-C is 130
