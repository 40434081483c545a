"""A broker connection opened only when a caller first needs one.

`mam event` and the heartbeater publish themselves only when no wrapper listens for the job's pokes
(mam.jobs.emit): the settings, paho and the broker's endpoint are imported here, on that path alone,
so the usual path never pays for them.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING

from mam.errors import BrokerError, ConfigError
from mam.util.once import first
from mam.workspace import Workspace

if TYPE_CHECKING:
    from mam.bus.mqtt import MqttClient

Opener = Callable[[], "MqttClient"]  # raises BrokerError when no broker can be reached


def opener(
    ws: Workspace,
    role: str,
    *,
    env_file: Path | None = None,
    timeout: float = 3.0,
    warn: bool = False,
    reconnect: bool = True,
    environ: Mapping[str, str] | None = None,
) -> Opener:
    """A function that connects to the configured or embedded broker (never starting one).

    With `warn`, the settings' own warnings (an unknown key in .mam.env...) go to stderr, as every
    mam command prints them. `environ`: the environment the settings come from (default: this process's)."""

    def connect() -> MqttClient:
        from mam.broker.endpoint import resolve_endpoint
        from mam.bus.connect import client_id
        from mam.bus.mqtt import MqttClient
        from mam.settings import load_settings

        try:
            if env_file is not None:
                settings = load_settings(env_file=env_file, required_env_file=True, environ=environ)
            else:
                settings = load_settings(env_file=ws.env_file, environ=environ)
        except ConfigError as e:
            raise BrokerError(f"cannot read the broker settings: {e}") from e
        if warn:
            for warning in settings.warnings:
                if first(warning):
                    print(f"mam: warning: {warning}", file=sys.stderr)
        endpoint = resolve_endpoint(settings, ws, autostart=False)
        return MqttClient(endpoint, client_id=client_id(settings, role), reconnect=reconnect).connect(timeout)

    return connect
