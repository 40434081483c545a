"""`mam broker start|stop|status`: the workspace's embedded amqtt broker; `status` also the configured ones."""

from __future__ import annotations

import click

from mam.broker import embedded
from mam.broker.survey import listing, survey
from mam.cli.common import App, echo, echo_json


@click.group("broker")
def broker() -> None:
    """The workspace's embedded MQTT broker (amqtt on 127.0.0.1, state in .mam/broker/).

    Used whenever MQTT_BROKER is empty. Commands that need a broker start it on demand;
    read-only commands never do. It accepts only the workspace's login: user `mam` and the
    password in .mam/broker/password (0600), named by `status --json` (`username`, `password_file`).
    """


@broker.command("start")
@click.option("--json", "as_json", is_flag=True, help="Print the status as JSON.")
@click.pass_obj
def start(app: App, as_json: bool) -> None:
    """Start the embedded broker, detached (harmless when it already runs)."""

    if app.settings.broker_host:
        echo(
            f"note: MQTT_BROKER={app.settings.broker_host} is configured; mam will use it, not the embedded broker",
            err=True,
        )
    st = embedded.start(app.ws, app.settings)
    _show(st, as_json)


@broker.command("stop")
@click.option("--json", "as_json", is_flag=True, help="Print the status as JSON.")
@click.pass_obj
def stop(app: App, as_json: bool) -> None:
    """Stop the embedded broker; no broker process is left (harmless when stopped)."""

    before = embedded.status(app.ws)
    after = embedded.stop(app.ws)
    if before.running and not as_json:
        echo(f"embedded broker stopped (was pid {before.pid}, 127.0.0.1:{before.port})")
    else:
        _show(after, as_json)


@broker.command("status")
@click.option("--json", "as_json", is_flag=True, help="Print the status as JSON.")
@click.pass_obj
def status(app: App, as_json: bool) -> None:
    """Show whether the embedded broker runs (never starts it), and MQTT_BROKER's brokers. Exit 0 either way.

    With MQTT_BROKER set (one host or a comma-separated list), every listed broker is shown with whether it
    accepts a connection, and the one in use: the first that accepts an MQTT CONNECT with this workspace's
    settings, as every mam client picks it. --json adds `brokers` [{broker, host, port, reachable, in_use}],
    `in_use` ("host:port" or null), `problem` (why none is in use, or null) and `embedded` (no MQTT_BROKER: the
    workspace's own broker, in use while it runs).
    """

    st = embedded.status(app.ws)
    if as_json:
        echo_json({**st.as_dict(), **listing(app.settings, app.ws)})
        return
    found = survey(app.settings, app.ws)
    if found is not None:
        echo(f"configured brokers (MQTT_BROKER): {found.summary()}")
    _show(st, False)


def _show(st, as_json: bool) -> None:  # type: ignore[no-untyped-def]
    if as_json:
        echo_json(st.as_dict())
    elif st.running and not st.authenticated:
        echo(
            f"embedded broker running: pid {st.pid}, 127.0.0.1:{st.port}, started by an older mam: it lets every "
            "local user in; "
            f"restart it with `mam broker stop && mam broker start` (log {st.log})"
        )
    elif st.running:
        echo(
            f"embedded broker running: pid {st.pid}, 127.0.0.1:{st.port}, user {st.username}, password in "
            f"{st.password_file} "
            f"(log {st.log})"
        )
    else:
        echo("embedded broker not running" + (" (removed a stale pid record)" if st.stale else ""))
