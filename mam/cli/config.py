"""`mam config`: every resolved setting, where it came from, secrets redacted."""

from __future__ import annotations

import click

from mam.cli.common import App, echo, echo_json
from mam.settings import example_env_text


@click.command("config")
@click.option(
    "--json",
    "as_json",
    is_flag=True,
    help="Print {workspace, env_file, settings: [{key, value, source, doc}], brokers, broker_in_use, warnings}.",
)
@click.option("--example", is_flag=True, help="Print a complete .mam.env.example instead.")
@click.pass_obj
def config(app: App, as_json: bool, example: bool) -> None:
    """Print every setting with its value and its source (environment, a .mam.env line, or default).

    Secrets (MQTT_PASSWORD, MAM_DISPATCH_SECRET) are shown as *** when set. A running-job cap or a
    token budget set in .mam.env can only be lowered by the environment: its source says so when the
    environment's value was ignored, and each MAM_MAX_RUNNING_JOBS_<ROLE> is listed too. An unknown key in
    .mam.env is a warning on stderr (and in --json) naming the closest known key.

    MQTT_BROKER's brokers (one, or a comma-separated list) are listed with the one in use: the first that
    accepts a TCP connection (`mam broker status` logs in to check); --json: `brokers`
    [{broker, host, port, reachable, in_use}] and `broker_in_use` ("host:port", or null: none reachable, or
    the embedded broker).
    """

    if example:
        echo(example_env_text(), nl=False)
        return
    from mam.broker.survey import survey

    settings = app.settings
    rows = settings.describe()
    found = survey(settings, app.ws, connect=False)
    if as_json:
        listed = found.as_dict() if found else {"brokers": [], "in_use": None}
        echo_json(
            {
                "workspace": str(app.ws.root),
                "env_file": str(settings.env_file) if settings.env_file else None,
                "settings": rows,
                "brokers": listed["brokers"],
                "broker_in_use": listed["in_use"],
                "warnings": list(settings.warnings),
            }
        )
        return
    echo(f"workspace: {app.ws.root}")
    echo(f"env file:  {settings.env_file or '(none)'}")
    width = max(len(r["key"]) for r in rows)
    for r in rows:
        echo(f"{r['key']:<{width}}  {r['value']!s:<24}  {r['source']}")
    if found is not None:
        echo(f"brokers:   {found.summary()}")
