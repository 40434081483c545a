"""One broker connection for a long-lived process (the node): every attempt it runs shares it.

Keyed by the workspace and every `MQTT_*` setting, so attempts whose callers name another broker or
login get a connection of their own. A connection that cannot be opened is not kept: the attempt
then connects by itself and fails as it always did (`broker_unavailable`, exit 3). paho reconnects a
kept one by itself (round the broker list) and mam.bus.mqtt subscribes again.
"""

from __future__ import annotations

import threading

from mam.bus.connect import open_client
from mam.bus.mqtt import MqttClient
from mam.errors import BrokerError
from mam.settings import KEYS, Settings
from mam.workspace import Workspace

_lock = threading.Lock()
_clients: dict[tuple[str, ...], MqttClient] = {}


def shared_client(settings: Settings, ws: Workspace) -> MqttClient | None:
    """This process's connection for `settings` and `ws`, opened on first use; None if none can be opened."""
    key = (str(ws.root), *(f"{k.name}={settings.raw(k.name)}" for k in KEYS if k.name.startswith("MQTT_")))
    with _lock:
        client = _clients.get(key)
        if client is None:
            try:
                client = open_client(settings, ws, role="node", timeout=30)
            except BrokerError:
                return None
            _clients[key] = client
        return client
