"""MqttClient.publish against a broker that drops the connection instead of acknowledging.

A heartbeater holds the job's lock while it waits for the ack, so a connection lost before
the ack must end the wait with a clear error, not after the whole timeout (the beat is on
disk already). The fake broker speaks just enough MQTT 3.1.1: CONNACK, then close on PUBLISH.
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


def _read_packet(conn: socket.socket) -> int:
    """Read one MQTT packet; return its type (high nibble of the first byte), or 0 at EOF."""
    head = conn.recv(1)
    if not head:
        return 0
    length, shift = 0, 0
    while True:
        byte = conn.recv(1)[0]
        length |= (byte & 0x7F) << shift
        shift += 7
        if not byte & 0x80:
            break
    while length:
        chunk = conn.recv(length)
        if not chunk:
            return 0
        length -= len(chunk)
    return head[0] >> 4


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
            client.publish("t/x", b"payload", qos=1, timeout=60)
    finally:
        client.close()
