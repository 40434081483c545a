"""Resolve the broker a command should talk to; start the embedded one only when allowed."""

from __future__ import annotations

from dataclasses import dataclass

from mam.broker import credentials, embedded
from mam.errors import BrokerError
from mam.settings import BrokerAddress, Settings
from mam.workspace import Workspace


@dataclass(frozen=True)
class BrokerEndpoint:
    host: str
    port: int
    username: str = ""
    password: str = ""
    tls: bool = False
    ca: str = ""
    cert: str = ""
    key: str = ""
    embedded: bool = False
    others: tuple[BrokerAddress, ...] = ()  # MQTT_BROKER's further entries, tried in order after host:port

    @property
    def addresses(self) -> tuple[BrokerAddress, ...]:
        """Every broker to try, in order: host:port first."""
        return (BrokerAddress(self.host, self.port), *self.others)

    @property
    def secured(self) -> bool:
        """True when the connection uses TLS or authentication."""
        return self.tls or bool(self.username)

    def describe(self) -> str:
        kind = "embedded" if self.embedded else "configured"
        extra = " tls" if self.tls else ""
        user = f" user={self.username}" if self.username else ""
        where = ",".join(str(a) for a in self.addresses)
        return f"{kind} broker{'s' if self.others else ''} {where}{extra}{user}"


def configured_endpoint(settings: Settings) -> BrokerEndpoint | None:
    """The broker(s) named by MQTT_BROKER, or None when none is configured."""
    addresses = settings.brokers
    if not addresses:
        return None
    return BrokerEndpoint(
        host=addresses[0].host,
        port=addresses[0].port,
        others=addresses[1:],
        username=settings.mqtt_username,
        password=settings.mqtt_password,
        tls=settings.mqtt_tls,
        ca=settings.mqtt_tls_ca,
        cert=settings.mqtt_tls_cert,
        key=settings.mqtt_tls_key,
    )


def resolve_endpoint(settings: Settings, ws: Workspace, *, autostart: bool = True) -> BrokerEndpoint:
    """The configured broker, else the embedded one (started on demand when `autostart`)."""
    configured = configured_endpoint(settings)
    if configured is not None:
        return configured

    status = embedded.status(ws)
    if status.running and status.port and status.authenticated:
        return _embedded_endpoint(ws, status.port)
    if not autostart or settings.no_autostart:
        if status.running:
            raise BrokerError(
                f"this workspace's embedded broker (pid {status.pid}) was started by an older mam and lets every "
                "local user in; "
                "restart it with `mam broker stop && mam broker start`"
            )
        raise BrokerError(
            "no broker is configured (MQTT_BROKER is empty) and this workspace's embedded broker is not running; "
            "start it with `mam broker start`, or set MQTT_BROKER in .mam.env"
        )
    started = embedded.start(ws, settings, on_demand=True)
    if not started.port:
        raise BrokerError(f"the embedded broker started but recorded no port; see {started.log}")
    return _embedded_endpoint(ws, started.port)


def _embedded_endpoint(ws: Workspace, port: int) -> BrokerEndpoint:
    """The embedded broker with the workspace's login (it refuses clients without it)."""

    login = credentials.load(ws)
    if login is None:
        raise BrokerError(
            f"the embedded broker runs but its password file {credentials.password_path(ws)} is missing; "
            "restart it with `mam broker stop && mam broker start`"
        )
    return BrokerEndpoint(host="127.0.0.1", port=port, username=login.username, password=login.password, embedded=True)
