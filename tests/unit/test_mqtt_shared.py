"""MqttClient as one connection shared by many jobs (issue 14: 100 sessions in one process).

At 100 sessions the shared connection's network thread was the bottleneck: every message was
matched against every subscription (one per job), and the retained final state was waited for by
each wrapper. Now a message costs a dict lookup (wildcards are matched, exact topics are not), the
final state is published without waiting (`flush` and `close` wait for the acks), a shared
connection's unsubscribe does not wait for the UNSUBACK, and a late ack for a wait that timed out
cannot satisfy a later wait that reuses its packet id. A fake broker withholds acks on demand.
"""

from __future__ import annotations

import logging
import socket
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field

import pytest

from mam.broker.endpoint import BrokerEndpoint
from mam.bus.mqtt import MqttClient
from tests.unit.test_mqtt_publish import CONNACK, _read


@dataclass
class HoldingBroker:
    """Accepts one client; acks SUBSCRIBE at once, never acks UNSUBSCRIBE, and acks a PUBLISH only
    once `release` is set."""

    endpoint: BrokerEndpoint
    release: threading.Event = field(default_factory=threading.Event)
    published: threading.Event = field(default_factory=threading.Event)
    unsubscribed: threading.Event = field(default_factory=threading.Event)


@pytest.fixture
def holding_broker() -> Iterator[HoldingBroker]:
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen()
    broker = HoldingBroker(BrokerEndpoint(host="127.0.0.1", port=server.getsockname()[1]))

    def serve() -> None:
        conn, _ = server.accept()
        with conn:
            while True:
                kind, body = _read(conn)
                if kind == 1:  # CONNECT
                    conn.sendall(CONNACK)
                elif kind == 8:  # SUBSCRIBE: SUBACK granting QoS 1
                    conn.sendall(bytes([0x90, 0x03]) + body[:2] + b"\x01")
                elif kind == 10:  # UNSUBSCRIBE: never answered
                    broker.unsubscribed.set()
                elif kind == 3:  # PUBLISH (QoS 1): PUBACK once released
                    topic_len = int.from_bytes(body[:2], "big")
                    packet_id = body[2 + topic_len : 4 + topic_len]
                    broker.published.set()
                    broker.release.wait(30)
                    conn.sendall(bytes([0x40, 0x02]) + packet_id)
                elif kind in (0, 14):  # EOF or DISCONNECT
                    return

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    try:
        yield broker
    finally:
        broker.release.set()
        server.close()
        thread.join(timeout=5)


def test_publish_without_waiting_is_acked_by_flush(holding_broker: HoldingBroker) -> None:
    client = MqttClient(holding_broker.endpoint, reconnect=False).connect(timeout=5)
    try:
        client.publish("t/state", b"final", qos=1, retain=True, wait=False)  # returns with the ack withheld
        assert holding_broker.published.wait(5)
        assert client.flush(0.05) == 1  # still unacked
        holding_broker.release.set()
        assert client.flush(10) == 0
    finally:
        client.close()


def test_close_waits_for_unacked_publishes_and_says_so_when_they_never_come(
    holding_broker: HoldingBroker, caplog: pytest.LogCaptureFixture
) -> None:
    client = MqttClient(holding_broker.endpoint, reconnect=False).connect(timeout=5)
    client.publish("t/state", b"final", qos=1, retain=True, wait=False)
    assert holding_broker.published.wait(5)
    with caplog.at_level(logging.WARNING, logger="mam.bus.mqtt"):
        client.close(flush_s=0.2)
    assert "did not acknowledge 1 publish(es)" in caplog.text


@pytest.mark.timeout(30)
def test_unsubscribe_without_waiting_needs_no_unsuback(holding_broker: HoldingBroker) -> None:
    client = MqttClient(holding_broker.endpoint, reconnect=False).connect(timeout=5)
    try:
        client.subscribe("t/events", lambda *_: None, timeout=5)
        client.unsubscribe("t/events", wait=False, timeout=120)  # the broker never sends the UNSUBACK
        assert holding_broker.unsubscribed.wait(5)
    finally:
        holding_broker.release.set()
        client.close(flush_s=0)


def test_a_late_ack_does_not_satisfy_a_later_wait_for_the_same_packet_id(holding_broker: HoldingBroker) -> None:
    client = MqttClient(holding_broker.endpoint, reconnect=False).connect(timeout=5)
    try:
        assert not client._wait_ack(7, 0.01)  # timed out
        client._on_subscribe(None, None, 7, [], None)  # its ack comes late
        assert not client._wait_ack(7, 0.01)  # the id, reused, still needs its own ack
        client._on_subscribe(None, None, 7, [], None)  # (the late ack of that second wait)
        client._on_subscribe(None, None, 7, [], None)  # an ack that comes before its wait counts
        assert client._wait_ack(7, 0.01)
    finally:
        client.close(flush_s=0)


def test_a_message_is_matched_against_wildcard_subscriptions_only(
    broker: object, monkeypatch: pytest.MonkeyPatch
) -> None:
    endpoint = broker.endpoint()  # type: ignore[attr-defined]
    client = MqttClient(endpoint).connect(timeout=5)
    got: dict[str, list[bytes]] = {}
    done = threading.Event()

    def handler(name: str):  # type: ignore[no-untyped-def]
        def on(_topic: str, payload: bytes, _retained: bool) -> None:
            got.setdefault(name, []).append(payload)
            if "job-007" in got and "all" in got:
                done.set()

        return on

    try:
        for i in range(50):  # one subscription per job, as a process driving 50 jobs has
            client.subscribe(f"shared-test/jobs/job-{i:03d}/events", handler(f"job-{i:03d}"))
        client.subscribe("shared-test/jobs/+/events", handler("all"))
        calls: list[str] = []
        real = client._paho.topic_matches_sub

        def counting(sub: str, topic: str) -> bool:
            calls.append(sub)
            return real(sub, topic)

        monkeypatch.setattr(client, "_paho", _Proxy(client._paho, topic_matches_sub=counting))
        client.publish("shared-test/jobs/job-007/events", b"e1", qos=1)
        assert done.wait(10)
        assert got == {"job-007": [b"e1"], "all": [b"e1"]}
        assert calls == ["shared-test/jobs/+/events"]  # not 51 matches per message
    finally:
        client.close()


class _Proxy:
    """The paho module with one attribute replaced."""

    def __init__(self, module: object, **override: object) -> None:
        self._module, self._override = module, override

    def __getattr__(self, name: str) -> object:
        return self._override[name] if name in self._override else getattr(self._module, name)


def test_publishes_handed_over_while_disconnected_do_not_break_the_next_publish_or_close(
    caplog: pytest.LogCaptureFixture,
) -> None:
    # paho's is_published raises for a message queued with no connection (the broker went away
    # during a job): the wrapper's next relay and its close must still go on, counting it unacked.
    client = MqttClient(BrokerEndpoint(host="127.0.0.1", port=1), reconnect=False)  # never connected
    client.publish_nowait("t/a", b"1")
    client.publish_nowait("t/b", b"2")
    with caplog.at_level(logging.WARNING, logger="mam.bus.mqtt"):
        client.close(flush_s=0.2)
    assert "did not acknowledge 2 publish(es)" in caplog.text


def test_two_handlers_of_one_topic_each_hear_it_and_one_leaving_keeps_the_other(broker, poll):
    """A node's attempts look at one runner's presence at once, on one connection: each subscribe is told
    (the broker re-sends the retained message to the new subscription), and one look's unsubscribe must not
    end the other's (it once replaced the other's handler: at 500 sessions, 1,002 jobs `target_not_found`)."""
    client = MqttClient(broker.endpoint(), reconnect=False).connect(timeout=5)
    try:
        topic = "mam/test/shared/presence"
        client.publish(topic, b"here", qos=1, retain=True)
        first: list[bytes] = []
        second: list[bytes] = []

        def hear_first(_t: str, payload: bytes, _r: bool) -> None:
            first.append(payload)

        def hear_second(_t: str, payload: bytes, _r: bool) -> None:
            second.append(payload)

        client.subscribe(topic, hear_first)
        poll(lambda: first == [b"here"], timeout=10)
        client.subscribe(topic, hear_second)
        poll(lambda: second == [b"here"], timeout=10)
        client.subscribe(topic, hear_second)  # the same handler again: told the retained copy once more, not twice
        poll(lambda: len(second) == 2, timeout=10)
        client.unsubscribe(topic, hear_first)
        client.publish(topic, b"live", qos=1)
        poll(lambda: second[-1:] == [b"live"], timeout=10)
        assert b"live" not in first and second.count(b"live") == 1
        client.unsubscribe(topic, hear_second)
        client.publish(topic, b"", qos=1, retain=True)  # clears it; nobody hears it any more
    finally:
        client.close()
