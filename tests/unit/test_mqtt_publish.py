"""MqttClient.publish against a broker that drops the connection instead of acknowledging.

A heartbeater holds the job's lock while it waits for the ack, so with `give_up_on_disconnect`
a connection lost before the ack must end the wait with a clear error, not after the whole
timeout (the beat is on disk already). Without it (a dispatch, a retained state) the wait goes
on through paho's reconnect, which sends the message again: failing early there would report
"not sent" for a message the broker then gets. The fake broker speaks just enough MQTT 3.1.1.
"""

from __future__ import annotations

import socket
import threading
from collections.abc import Iterator

import pytest

from mam.broker.endpoint import BrokerEndpoint
from mam.bus.mqtt import MqttClient
from mam.errors import BrokerError

CONNACK = bytes([0x20, 0x02, 0x00, 0x00])


def _read(conn: socket.socket) -> tuple[int, bytes]:
    """Read one MQTT packet: (its type, the high nibble of the first byte, or 0 at EOF; its body)."""
    head = conn.recv(1)
    if not head:
        return 0, b""
    length, shift = 0, 0
    while True:
        byte = conn.recv(1)[0]
        length |= (byte & 0x7F) << shift
        shift += 7
        if not byte & 0x80:
            break
    body = b""
    while len(body) < length:
        chunk = conn.recv(length - len(body))
        if not chunk:
            return 0, b""
        body += chunk
    return head[0] >> 4, body


def _read_packet(conn: socket.socket) -> int:
    return _read(conn)[0]


@pytest.fixture
def dropping_broker() -> Iterator[BrokerEndpoint]:
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen()
    published = threading.Event()

    def serve() -> None:
        conn, _ = server.accept()
        with conn:
            while True:
                kind = _read_packet(conn)
                if kind == 1:  # CONNECT
                    conn.sendall(CONNACK)
                elif kind in (0, 3):  # EOF, or PUBLISH: drop the connection without a PUBACK
                    published.set()
                    return

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    try:
        yield BrokerEndpoint(host="127.0.0.1", port=server.getsockname()[1])
    finally:
        server.close()
        thread.join(timeout=5)
    assert published.is_set()


def test_a_connection_lost_before_the_ack_ends_the_wait(dropping_broker: BrokerEndpoint) -> None:
    client = MqttClient(dropping_broker, reconnect=False).connect(timeout=5)
    try:
        with pytest.raises(BrokerError, match="lost the connection"):
            client.publish("t/x", b"payload", qos=1, timeout=60, give_up_on_disconnect=True)
    finally:
        client.close()


@pytest.fixture
def flaky_broker() -> Iterator[tuple[BrokerEndpoint, list[bytes]]]:
    """Drops the connection on the first PUBLISH; on the next connection it acks what comes."""
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen()
    received: list[bytes] = []

    def serve() -> None:
        for attempt in range(2):
            conn, _ = server.accept()
            with conn:
                while True:
                    kind, body = _read(conn)
                    if kind == 1:
                        conn.sendall(CONNACK)
                    elif kind == 3 and attempt == 0 or kind == 0:
                        break
                    elif kind == 3:
                        topic_len = int.from_bytes(body[:2], "big")
                        packet_id = body[2 + topic_len : 4 + topic_len]
                        received.append(body[4 + topic_len :])
                        conn.sendall(bytes([0x40, 0x02]) + packet_id)  # PUBACK
                    elif kind == 14:  # DISCONNECT
                        return

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    try:
        yield BrokerEndpoint(host="127.0.0.1", port=server.getsockname()[1]), received
    finally:
        server.close()
        thread.join(timeout=5)


def test_by_default_the_wait_goes_on_through_a_reconnect(flaky_broker: tuple[BrokerEndpoint, list[bytes]]) -> None:
    endpoint, received = flaky_broker
    client = MqttClient(endpoint).connect(timeout=5)
    try:
        client.publish("t/x", b"the dispatch", qos=1, timeout=60)  # returns once the resent copy is acked
    finally:
        client.close()
    assert received == [b"the dispatch"]
