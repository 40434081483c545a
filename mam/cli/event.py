"""`mam event started|progress|heartbeat|completed|error`: the agent side of a job.

Run from the agent's own shell (the brief's footer prints the commands), once per event. Each call
hands the event to mam.jobs.emit's Emitter, the one writer of job events: it signs the event with
the job's token and commits it to the workspace's store (which allocates its seq under the job's
lock), then pokes the job's key (mam.util.pokes), which wakes the job's wrapper; only when no
wrapper listens does it publish the event over MQTT itself (a broker outage loses nothing: the
event stays on disk, with a warning). What the command reads of its caller (environment, working
folder, parent pid) it reads through mam.util.caller, so the node can run it for a client.
Exit codes: 0 recorded (handed to the wrapper, published, or kept on disk with a warning); 1 the job
already ended, or the event is invalid or cannot fit the wire; 2 a malformed job id or usage; 5 no such job.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import click

from mam.bus.opener import opener
from mam.cli.common import App, echo_json, workspace_option
from mam.ids import check_job_id
from mam.jobs import heartbeat as heartbeater
from mam.jobs.emit import DatabaseStore, Emitted, Emitter
from mam.jobs.record import read_record
from mam.settings import positive_seconds
from mam.util import caller

MAX_REPORT_BYTES = 64 * 1024  # read no more of a report file than an event could ever carry
MAX_TEXT = 4000  # what an event keeps of a message or reason
WHERE = {
    "broker": "published",
    "wrapper": "handed to the wrapper",
    "runner": "on disk, for the runner to relay",
    "disk": "on disk only",
}


@click.group("event")
def event() -> None:
    """Agent side: report on the job in your brief (the brief's footer shows the exact commands).

    \b
    Exit codes: 0 recorded (handed to the wrapper, published, or kept on disk if
    the broker is down); 1 the job already ended or the input is invalid; 2 a
    malformed job id; 5 unknown job.
    A report too big for one signed event (64 KiB) is cut, with a marker line.
    """


def _emit(
    app: App, job_id: str, type: str, body: dict[str, Any], as_json: bool, fit_field: str | None = None
) -> Emitted:
    ws = app.ws
    record = read_record(ws, job_id)  # JobNotFound (exit 5) before anything is opened or created
    store = DatabaseStore(ws)
    env_file = Path(caller.cwd(), app.env_file_arg) if app.env_file_arg else None
    connect = opener(ws, "agent", env_file=env_file, warn=True, reconnect=False, environ=caller.environ())
    emitter = Emitter(ws, store, records={job_id: record}, connect=connect)
    try:
        out = emitter.emit(job_id, type, body, fit_field=fit_field)
    finally:
        emitter.close()
        store.close()
    if out.cut:
        click.echo(
            f"mam: warning: the {fit_field} was cut to fit the 64 KiB event limit (marked where it was cut; "
            f"the whole text stays in {body.get('report_path', 'its file')})",
            err=True,
        )
    if out.warning:
        click.echo(f"mam: warning: {out.warning}", err=True)
    if as_json:
        echo_json({"job": job_id, "seq": out.envelope.seq, "type": type, "published": out.published, "via": out.via})
    else:
        click.echo(f"{type} recorded for {job_id} (seq {out.envelope.seq}, {WHERE[out.via]})")
    return out


class _Count(click.IntRange):
    """A whole number >= 0, worded as "not a valid integer" when it is no number at all."""

    name = "integer"


def _job_id(_ctx: click.Context, _param: click.Parameter, value: str) -> str:
    return check_job_id(value)


job_option = click.option("--job", "job_id", required=True, callback=_job_id, help="The job id from your brief.")
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
@click.pass_obj
def started(app: App, job_id: str, nonce: str | None, heartbeat: float | None, as_json: bool) -> None:
    """Acknowledge the brief (once), optionally starting an automatic heartbeat."""
    if nonce is None:
        nonce = str(read_record(app.ws, job_id).get("nonce", ""))
        body: dict[str, Any] = {"nonce": nonce, "nonce_from": "record"}
    else:
        body = {"nonce": nonce}
    if heartbeat is not None:
        body["heartbeat_ms"] = int(positive_seconds(heartbeat, "--heartbeat") * 1000)
    _emit(app, job_id, "started", body, as_json)
    if heartbeat is not None:
        environ, me = caller.environ(), caller.current()
        agent_pid = int(environ.get("MAM_AGENT_PID") or me.ppid)
        # A new interpreter, never a fork: the process running this command may hold threads (the node).
        heartbeater.start(app.ws, job_id, heartbeat, agent_pid, caller_pid=me.pid, environ=environ)


@event.command("progress")
@workspace_option
@job_option
@click.option("--message", required=True, help="What you are doing now.")
@json_option
@click.pass_obj
def progress(app: App, job_id: str, message: str, as_json: bool) -> None:
    """Report progress (also counts as a sign of life)."""
    _emit(app, job_id, "progress", {"message": message[:MAX_TEXT]}, as_json)


@event.command("heartbeat")
@workspace_option
@job_option
@json_option
@click.pass_obj
def heartbeat(app: App, job_id: str, as_json: bool) -> None:
    """Send one heartbeat by hand (`started --heartbeat N` does it automatically)."""
    _emit(app, job_id, "heartbeat", {}, as_json)


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
@json_option
@click.pass_obj
def completed(app: App, job_id: str, message: str, report: str | None, tokens: int | None, as_json: bool) -> None:
    """Finish the job successfully."""
    body: dict[str, Any] = {"message": message[:MAX_TEXT]}
    if tokens is not None:
        body["tokens"] = tokens
    if report:
        path = Path(caller.cwd(), report)  # the caller's folder, not this process's
        if path.is_dir():
            raise click.BadParameter(f"File {report!r} is a directory.", param_hint="'--report'")
        try:
            with open(path, "rb") as f:
                data = f.read(MAX_REPORT_BYTES)
        except OSError as e:
            raise click.BadParameter(f"cannot read {report}: {e.strerror}", param_hint="'--report'") from e
        # What counts is the size of the signed envelope, not of the file: the emitter cuts the
        # report (with a marker) until the encoded event fits the 64 KiB message limit.
        body["report"] = data.decode("utf-8", "replace")
        body["report_path"] = str(path.resolve())
    _emit(app, job_id, "completed", body, as_json, fit_field="report" if report else None)


@event.command("error")
@workspace_option
@job_option
@click.option("--reason", required=True, help="Why you cannot finish the job.")
@json_option
@click.pass_obj
def error(app: App, job_id: str, reason: str, as_json: bool) -> None:
    """End the job as failed, with a reason."""
    _emit(app, job_id, "error", {"reason": reason[:MAX_TEXT]}, as_json)
