"""An in-memory MQTT 3.1.1 broker for tests: the parts of MQTT mam uses, in the test's own process.

mam's processes (the node, the wrappers in the panes, `mam delegate`) are separate processes that
reach their broker over TCP, so the double listens on a free loopback port like a real broker; but
it runs on an asyncio loop in a daemon thread of the pytest process, keeps everything in memory,
starts in about a millisecond, and lets a test look inside (`retained`, `clients`) and drop
connections (`drop`, `stop`/`restart`) without a process to signal.

What it does, as Mosquitto does it (docs/testing.md lists the same):

- CONNECT with a clean session (a persistent session is refused: mam never asks for one), optional
  user name and password (`logins`: refused with CONNACK 4 when they do not match), a last will
  (published, retained if asked, when a connection ends without DISCONNECT: a drop, a keepalive
  timeout, a takeover by a new connection with the same client id).
- PUBLISH at QoS 0 and 1 (PUBACK); QoS 2 closes the connection (mam never sends it).
- Retained messages: kept per topic, an empty retained payload clears the topic; sent with the
  retain flag to a new subscription, live messages without it.
- SUBSCRIBE / UNSUBSCRIBE with `+` and `#` wildcards (a `$` topic matches no leading wildcard), the
  granted QoS min(asked, 1), an invalid filter refused with 0x80; a message goes once to each
  client, at the highest QoS among its matching subscriptions, capped by the publish's QoS.
- PINGREQ, DISCONNECT, and the keepalive (a connection silent for 1.5 times its keepalive is closed).
- `stop()` closes every connection and the listener and forgets the retained messages (Mosquitto
  with `persistence false`, as tests run it); `restart()` listens again on the same port.
"""

from __future__ import annotations

import asyncio
import socket
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

from mam.broker.embedded import free_port
from tests.helpers.brokers import Loopback

CONNECT, CONNACK, PUBLISH, PUBACK = 1, 2, 3, 4
SUBSCRIBE, SUBACK, UNSUBSCRIBE, UNSUBACK = 8, 9, 10, 11
PINGREQ, PINGRESP, DISCONNECT = 12, 13, 14


def _length(n: int) -> bytes:
    out = bytearray()
    while True:
        byte, n = n % 128, n // 128
        out.append(byte | (0x80 if n else 0))
        if not n:
            return bytes(out)


def _packet(first: int, body: bytes) -> bytes:
    return bytes([first]) + _length(len(body)) + body


def _string(s: str) -> bytes:
    raw = s.encode()
    return len(raw).to_bytes(2, "big") + raw


def valid_filter(f: str) -> bool:
    """A topic filter MQTT 3.1.1 accepts: `#` only last and alone in its level, `+` alone in its level."""
    if not f or "\x00" in f:
        return False
    levels = f.split("/")
    for i, level in enumerate(levels):
        if "#" in level and (level != "#" or i != len(levels) - 1):
            return False
        if "+" in level and level != "+":
            return False
    return True


def matches(topic_filter: str, topic: str) -> bool:
    """True when `topic` (a published name) matches `topic_filter` (a subscription)."""
    if topic.startswith("$") and topic_filter[:1] in ("+", "#"):
        return False
    f_levels, t_levels = topic_filter.split("/"), topic.split("/")
    for i, f in enumerate(f_levels):
        if f == "#":
            return True
        if i >= len(t_levels):
            return False
        if f != "+" and f != t_levels[i]:
            return False
    return len(f_levels) == len(t_levels)


class ProtocolError(Exception):
    """The client sent what this broker does not take: its connection is closed."""


@dataclass
class _Client:
    client_id: str
    writer: asyncio.StreamWriter
    will: tuple[str, bytes, int, bool] | None = None
    subs: dict[str, int] = field(default_factory=dict)  # filter -> granted QoS
    next_id: int = 0
    clean_exit: bool = False

    def send(self, data: bytes) -> None:
        if not self.writer.is_closing():
            self.writer.write(data)

    def packet_id(self) -> int:
        self.next_id = self.next_id % 65535 + 1
        return self.next_id


class MqttDouble(Loopback):
    """One in-memory broker on 127.0.0.1:`port`. Use `start_double()`; `stop()` when done.

    Shaped like tests.helpers.brokers.RunningBroker (`kind`, `host`, `port`, `env()`, `endpoint()`,
    `stop()`, `kill()`, `restart()`, `running`), so a fixture can hand out either."""

    kind = "double"

    def __init__(self, *, port: int | None = None, logins: dict[str, str] | None = None) -> None:
        self.port = port or free_port()
        self.logins = logins  # user -> password; None: anonymous allowed
        self.retained: dict[str, tuple[bytes, int]] = {}  # topic -> (payload, qos)
        self._clients: dict[str, _Client] = {}
        self._loop = asyncio.new_event_loop()
        self._server: asyncio.base_events.Server | None = None
        self._thread = threading.Thread(target=self._loop.run_forever, name=f"mqtt-double-{self.port}", daemon=True)
        self._thread.start()
        self.workdir = Path("/nonexistent")  # no files: everything is in memory

    # -- the RunningBroker shape (host, endpoint, env: brokers.Loopback) --------------------------
    @property
    def running(self) -> bool:
        return self._server is not None

    def start(self) -> MqttDouble:
        self._call(self._start())
        return self

    def stop(self, sig: int = 0) -> None:  # noqa: ARG002  (a real broker's signal: there is no process)
        """Close every connection (no will is published: the broker itself went away) and the listener,
        and forget the retained messages."""
        if not self._loop.is_closed() and self._loop.is_running():
            self._call(self._stop())

    kill = stop  # a crash and a clean stop look the same from a client: the socket closes

    def restart(self) -> None:
        self.stop()
        self.start()

    def close(self) -> None:
        """Stop and end the loop's thread (at the end of a session)."""
        self.stop()
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(5)
        self._loop.close()

    # -- looking inside, and disconnects ------------------------------------------------------------
    def clients(self) -> list[str]:
        """The client ids connected now."""
        return self._call(self._client_ids())

    def drop(self, client_id: str | None = None) -> int:
        """Close one client's connection (all when None) as a network failure would: its will is
        published. Returns how many were dropped."""
        return self._call(self._drop(client_id))

    def subscriptions(self, client_id: str) -> dict[str, int]:
        return self._call(self._subscriptions(client_id))

    # -- the loop's side ------------------------------------------------------------------------------
    def _call(self, coro):  # type: ignore[no-untyped-def]
        return asyncio.run_coroutine_threadsafe(coro, self._loop).result(10)

    async def _client_ids(self) -> list[str]:
        return sorted(self._clients)

    async def _subscriptions(self, client_id: str) -> dict[str, int]:
        c = self._clients.get(client_id)
        return dict(c.subs) if c else {}

    async def _start(self) -> None:
        if self._server is None:
            self._server = await asyncio.start_server(self._serve, self.host, self.port, reuse_address=True)

    async def _stop(self) -> None:
        server, self._server = self._server, None
        if server is not None:
            server.close()
        for c in list(self._clients.values()):
            c.clean_exit = True  # the broker went: nobody is left to get a will
            c.writer.close()
        self._clients.clear()
        self.retained.clear()
        if server is not None:
            await server.wait_closed()

    async def _drop(self, client_id: str | None) -> int:
        victims = [c for c in self._clients.values() if client_id in (None, c.client_id)]
        for c in victims:
            c.writer.transport.abort()
        return len(victims)

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        sock = writer.get_extra_info("socket")
        if sock is not None:
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        client: _Client | None = None
        try:
            kind, _flags, body = await asyncio.wait_for(self._read(reader), 10)
            if kind != CONNECT:
                return
            client, keepalive = self._connect(body, writer)
            if client is None:
                return
            timeout = keepalive * 1.5 if keepalive else None
            while True:
                kind, flags, body = await asyncio.wait_for(self._read(reader), timeout)
                if kind == DISCONNECT:
                    client.clean_exit = True
                    return
                self._handle(client, kind, flags, body)
                await writer.drain()
        except (asyncio.IncompleteReadError, asyncio.TimeoutError, ConnectionError, ProtocolError, OSError):
            pass
        finally:
            if client is not None and self._clients.get(client.client_id) is client:
                del self._clients[client.client_id]
                if not client.clean_exit and client.will is not None:
                    self._publish(*client.will)
            if not writer.is_closing():
                writer.close()

    @staticmethod
    async def _read(reader: asyncio.StreamReader) -> tuple[int, int, bytes]:
        first = (await reader.readexactly(1))[0]
        length, shift = 0, 0
        while True:
            byte = (await reader.readexactly(1))[0]
            length |= (byte & 0x7F) << shift
            shift += 7
            if not byte & 0x80:
                break
            if shift > 21:
                raise ProtocolError("malformed remaining length")
        return first >> 4, first & 0x0F, await reader.readexactly(length)

    def _connect(self, body: bytes, writer: asyncio.StreamWriter) -> tuple[_Client | None, int]:
        pos = 0

        def take() -> bytes:
            nonlocal pos
            n = int.from_bytes(body[pos : pos + 2], "big")
            out = body[pos + 2 : pos + 2 + n]
            pos += 2 + n
            return out

        name = take()
        level, flags = body[pos], body[pos + 1]
        keepalive = int.from_bytes(body[pos + 2 : pos + 4], "big")
        pos += 4
        if name != b"MQTT" or level != 4:
            writer.write(_packet(0x20, b"\x00\x01"))  # unacceptable protocol version
            return None, 0
        client_id = take().decode()
        will = None
        if flags & 0x04:
            will_topic, will_payload = take().decode(), take()
            will = (will_topic, will_payload, (flags >> 3) & 0x03, bool(flags & 0x20))
        user = take().decode() if flags & 0x80 else None
        password = take().decode() if flags & 0x40 else None
        if not flags & 0x02:
            writer.write(_packet(0x20, b"\x00\x02"))  # identifier rejected: only clean sessions here
            return None, 0
        if self.logins is not None and (user is None or self.logins.get(user) != password):
            writer.write(_packet(0x20, b"\x00\x04"))  # bad user name or password
            return None, 0
        client_id = client_id or f"auto-{id(writer):x}"
        old = self._clients.pop(client_id, None)
        if old is not None:  # a takeover: the old connection ends as a failure would (its will goes out)
            old.writer.transport.abort()
            if old.will is not None:
                self._publish(*old.will)
        client = _Client(client_id, writer, will)
        self._clients[client_id] = client
        writer.write(_packet(0x20, b"\x00\x00"))
        return client, keepalive

    def _handle(self, client: _Client, kind: int, flags: int, body: bytes) -> None:
        if kind == PUBLISH:
            qos, retain = (flags >> 1) & 0x03, bool(flags & 0x01)
            n = int.from_bytes(body[:2], "big")
            topic = body[2 : 2 + n].decode()
            pos = 2 + n
            if qos == 2 or qos == 3 or not topic or "+" in topic or "#" in topic:
                raise ProtocolError("QoS 2, or a wildcard in a topic name")
            if qos == 1:
                packet_id = body[pos : pos + 2]
                pos += 2
            self._publish(topic, body[pos:], qos, retain)
            if qos == 1:
                client.send(_packet(PUBACK << 4, packet_id))
        elif kind == SUBSCRIBE:
            packet_id, pos, granted = body[:2], 2, bytearray()
            new: list[tuple[str, int]] = []
            while pos < len(body):
                n = int.from_bytes(body[pos : pos + 2], "big")
                topic_filter = body[pos + 2 : pos + 2 + n].decode()
                qos = body[pos + 2 + n]
                pos += 3 + n
                if not valid_filter(topic_filter) or qos > 2:
                    granted.append(0x80)
                    continue
                client.subs[topic_filter] = min(qos, 1)
                granted.append(min(qos, 1))
                new.append((topic_filter, min(qos, 1)))
            client.send(_packet(SUBACK << 4, packet_id + bytes(granted)))
            for topic_filter, sub_qos in new:  # retained messages after the SUBACK, as Mosquitto sends them
                for topic, (payload, qos) in list(self.retained.items()):
                    if matches(topic_filter, topic):
                        self._deliver(client, topic, payload, min(qos, sub_qos), retain=True)
        elif kind == UNSUBSCRIBE:
            packet_id, pos = body[:2], 2
            while pos < len(body):
                n = int.from_bytes(body[pos : pos + 2], "big")
                client.subs.pop(body[pos + 2 : pos + 2 + n].decode(), None)
                pos += 2 + n
            client.send(_packet(UNSUBACK << 4, packet_id))
        elif kind == PINGREQ:
            client.send(_packet(PINGRESP << 4, b""))
        elif kind == PUBACK:
            pass  # the client's ack of a QoS 1 delivery: clean sessions keep nothing to resend
        else:
            raise ProtocolError(f"packet type {kind}")

    def _publish(self, topic: str, payload: bytes, qos: int, retain: bool) -> None:
        if retain:
            if payload:
                self.retained[topic] = (payload, qos)
            else:
                self.retained.pop(topic, None)
        for c in list(self._clients.values()):
            granted = [q for f, q in c.subs.items() if matches(f, topic)]
            if granted:
                self._deliver(c, topic, payload, min(qos, max(granted)), retain=False)

    @staticmethod
    def _deliver(client: _Client, topic: str, payload: bytes, qos: int, *, retain: bool) -> None:
        first = (PUBLISH << 4) | (qos << 1) | int(retain)
        head = _string(topic) + (client.packet_id().to_bytes(2, "big") if qos else b"")
        client.send(_packet(first, head + payload))


def start_double(*, port: int | None = None, logins: dict[str, str] | None = None) -> MqttDouble:
    """A running double on a free loopback port (or `port`)."""
    return MqttDouble(port=port, logins=logins).start()


def running_double() -> Iterator[MqttDouble]:
    """For a fixture to `yield from`: a double, closed afterwards."""
    b = start_double()
    try:
        yield b
    finally:
        b.close()
