"""Which of MQTT_BROKER's brokers answer, and the one mam connects to (`mam broker status`, `mam config`,
`mam doctor`). A client takes the first of the list that accepts its CONNECT (mam/bus/mqtt.py): so does this."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from mam.broker.embedded import port_accepts, status
from mam.broker.endpoint import configured_endpoint
from mam.errors import BrokerError
from mam.settings import BrokerAddress, Settings
from mam.workspace import Workspace

PROBE_S = 0.5  # a TCP connect to each listed broker
CONNECT_S = 3.0  # the MQTT CONNECT that finds the one in use


@dataclass(frozen=True)
class BrokerSurvey:
    brokers: tuple[BrokerAddress, ...]
    reachable: tuple[bool, ...]  # per broker: it accepts a TCP connection
    in_use: BrokerAddress | None  # the first that accepted an MQTT CONNECT with this workspace's settings
    problem: str = ""  # why none is in use

    def as_dict(self) -> dict[str, Any]:
        return {
            "brokers": [
                {"broker": str(a), "host": a.host, "port": a.port, "reachable": r, "in_use": a == self.in_use}
                for a, r in zip(self.brokers, self.reachable)
            ],
            "in_use": str(self.in_use) if self.in_use else None,
            "problem": self.problem or None,
        }

    def summary(self) -> str:
        listed = ", ".join(
            f"{a}{' (in use)' if a == self.in_use else '' if r else ' (not reachable)'}"
            for a, r in zip(self.brokers, self.reachable)
        )
        return listed + ("" if self.in_use else f"; none in use: {self.problem}")


def survey(settings: Settings, ws: Workspace, *, connect: bool = True) -> BrokerSurvey | None:
    """None when MQTT_BROKER is empty (the embedded broker). `connect=False`: TCP probes only, and the
    first reachable broker is named in use (no paho import, no login)."""

    endpoint = configured_endpoint(settings)
    if endpoint is None:
        return None
    brokers = endpoint.addresses
    reachable = tuple(port_accepts(a.port, a.host, timeout=PROBE_S) for a in brokers)
    if not connect:
        first = next((a for a, r in zip(brokers, reachable) if r), None)
        return BrokerSurvey(brokers, reachable, first, "" if first else "no listed broker accepts a connection")
    from mam.bus.connect import client_id
    from mam.bus.mqtt import MqttClient

    try:
        client = MqttClient(endpoint, client_id=client_id(settings, "survey"), reconnect=False).connect(CONNECT_S)
    except BrokerError as e:
        return BrokerSurvey(brokers, reachable, None, str(e))
    in_use = client.address
    client.close(flush_s=0)
    return BrokerSurvey(brokers, reachable, in_use)


def listing(settings: Settings, ws: Workspace, *, connect: bool = True) -> dict[str, Any]:
    """The brokers as `mam broker status --json` and `mam node status --json` show them: MQTT_BROKER's list with the
    one in use, or (`embedded`: true) the workspace's embedded broker, in use while it runs."""
    found = survey(settings, ws, connect=connect)
    if found is not None:
        return {**found.as_dict(), "embedded": False}
    st = status(ws)
    in_use = f"127.0.0.1:{st.port}" if st.running and st.port else None
    return {"brokers": [], "in_use": in_use, "problem": None, "embedded": True}
