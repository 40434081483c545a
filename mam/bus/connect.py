"""Open an MQTT client for this workspace: the configured broker or the embedded one."""

from __future__ import annotations

import os
import uuid

from mam.broker.endpoint import BrokerEndpoint, resolve_endpoint
from mam.bus.mqtt import MqttClient, Will
from mam.settings import Settings
from mam.workspace import Workspace


def client_id(settings: Settings, role: str) -> str:
    prefix = settings.mqtt_client_id_prefix or "mam"
    return f"{prefix}-{role}-{os.getpid()}-{uuid.uuid4().hex[:6]}"


def open_client(
    settings: Settings,
    ws: Workspace,
    *,
    role: str,
    autostart: bool = True,
    will: Will | None = None,
    timeout: float = 5.0,
    endpoint: BrokerEndpoint | None = None,
) -> MqttClient:
    """A connected client; raises BrokerError when no broker can be reached."""
    ep = endpoint or resolve_endpoint(settings, ws, autostart=autostart)
    return MqttClient(ep, client_id=client_id(settings, role), will=will).connect(timeout)
