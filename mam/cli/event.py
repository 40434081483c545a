"""`mam event started|progress|heartbeat|completed|error`: the agent side of a job.

Run from the agent's own shell. Each call signs one event with the job's token, records it
in the workspace's store (so a broker outage loses nothing) and publishes it.
Exit codes: 0 recorded (and published, or kept on disk with a warning); 1 the job already
ended, or the event is invalid or cannot fit the wire; 2 a malformed job id; 5 no such job.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import click

from mam.broker.endpoint import resolve_endpoint
from mam.bus.connect import client_id
from mam.bus.mqtt import MqttClient
from mam.cli.common import App, echo_json, workspace_option
from mam.errors import BrokerError
from mam.ids import check_job_id
from mam.jobs.emit import Emitter, relayed
from mam.jobs.heartbeat import fork
from mam.jobs.record import read_record
from mam.settings import positive_seconds
from mam.store.registry import Registry

MAX_REPORT_BYTES = 64 * 1024  # read no more of a report file than an event could ever carry


@click.group("event")
def event() -> None:
    """Agent side: report on the job in your brief (the brief's footer shows the exact commands).

    \b
    Exit codes: 0 recorded (published, or kept on disk if the broker is down);
    1 the job already ended or the input is invalid; 2 a malformed job id; 5 unknown job.
    A report too big for one signed event (64 KiB) is cut, with a marker line.
    """


def _emit(app: App, job_id: str, type: str, body: dict[str, Any], as_json: bool, fit_field: str | None = None) -> Any:

    ws = app.ws
    record = read_record(ws, job_id)  # JobNotFound (exit 5) before anything is opened or created
    registry = Registry(ws)
    # A remote job's events are published by this host's runner, in seq order: no connection needed.
    client, warning = (None, "") if relayed(record) else _connect(app)
    try:
        out = Emitter(ws, registry, client, records={job_id: record}).emit(job_id, type, body, fit_field=fit_field)
    finally:
        if client is not None:
            client.close()
        registry.close()
    note = f"{warning}; the event is recorded on disk" if warning else out.warning
    if out.cut:
        click.echo(
            f"mam: warning: the {fit_field} was cut to fit the 64 KiB event limit (marked where it was cut; "
            f"the whole text stays in {body.get('report_path', 'its file')})",
            err=True,
        )
    if note:
        click.echo(f"mam: warning: {note}", err=True)
    if as_json:
        echo_json({"job": job_id, "seq": out.envelope.seq, "type": type, "published": out.published})
    else:
        click.echo(
            f"{type} recorded for {job_id} (seq "
            f"{out.envelope.seq}{', published' if out.published else ', on disk only'})"
        )
    return out


def _connect(app: App) -> tuple[Any, str]:
    """A client for the configured or embedded broker (never started from here), or a warning."""

    try:
        endpoint = resolve_endpoint(app.settings, app.ws, autostart=False)
        return MqttClient(endpoint, client_id=client_id(app.settings, "agent"), reconnect=False).connect(timeout=3), ""
    except BrokerError as e:
        return None, str(e)


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
def started(app: App, job_id: str, nonce: str, heartbeat: float | None, as_json: bool) -> None:
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
        agent_pid = int(os.environ.get("MAM_AGENT_PID") or os.getppid())
        # Fork rather than start a new interpreter: this process has already imported everything the
        # heartbeater needs (its broker connection and registry were closed by _emit).
        fork(app.ws, job_id, heartbeat, agent_pid)


@event.command("progress")
@workspace_option
@job_option
@click.option("--message", required=True, help="What you are doing now.")
@json_option
@click.pass_obj
def progress(app: App, job_id: str, message: str, as_json: bool) -> None:
    """Report progress (also counts as a sign of life)."""
    _emit(app, job_id, "progress", {"message": message[:4000]}, as_json)


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
    type=click.Path(dir_okay=False),
    default=None,
    help="A report file to attach (its text travels with the event).",
)
@click.option(
    "--tokens",
    type=click.IntRange(min=0),
    default=None,
    help="Tokens the job used, where your CLI keeps no usage mam can read (mam prefers the CLI's own records).",
)
@json_option
@click.pass_obj
def completed(app: App, job_id: str, message: str, report: str | None, tokens: int | None, as_json: bool) -> None:
    """Finish the job successfully."""
    body: dict[str, Any] = {"message": message[:4000]}
    if tokens is not None:
        body["tokens"] = tokens
    if report:
        path = Path(report)
        try:
            with open(path, "rb") as f:
                data = f.read(MAX_REPORT_BYTES)
        except OSError as e:
            raise click.BadParameter(f"cannot read {report}: {e.strerror}", param_hint="--report") from e
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
    _emit(app, job_id, "error", {"reason": reason[:4000]}, as_json)
