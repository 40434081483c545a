"""A small, synchronous-feeling wrapper over paho-mqtt 2.x.

It owns connection set-up (MQTT 3.1.1 for amqtt, TLS, auth, TCP_NODELAY, last will),
publish-and-wait-for-ack, and resubscription after a reconnect. It knows nothing of jobs.
"""

from __future__ import annotations

import logging
import os
import socket
import ssl
import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from mam.broker.endpoint import BrokerEndpoint
from mam.errors import BrokerError, Unacknowledged
from mam.settings import BrokerAddress

if TYPE_CHECKING:
    from paho.mqtt.client import MQTTMessageInfo

log = logging.getLogger(__name__)

Handler = Callable[[str, bytes, bool], None]
SUBSCRIBE_RETRY_S = 0.5  # after a refused SUBACK
# Subscriptions ask for QoS 0: every message mam sends is published QoS 1 (acknowledged by the broker), and
# with clean sessions a subscriber gains nothing from QoS 1 delivery (what is in flight when its connection
# drops is dropped either way; while it lasts, TCP delivers). On a NATS cluster a QoS 1 subscription costs a
# replicated JetStream consumer, made before its SUBACK, one at a time per connection: measured on three
# nodes, 237 of 300 subscriptions made at once were refused, and with a node down they took 118 s and some
# got no retained message; at QoS 0 all 300 were granted within 0.1 s, up or down, each with its retained
# message (docs/broker.md).
SUBSCRIBE_QOS = 0
LOGIN_REFUSALS = ("Not authorized", "Bad user name or password")  # CONNACKs that no other broker of a list changes


@dataclass(frozen=True)
class Will:
    topic: str
    payload: bytes
    qos: int = 1
    retain: bool = True


def _acked(info: MQTTMessageInfo) -> bool:
    """True once the broker acknowledged the message. paho's `is_published` raises for a message handed
    over while disconnected (paho still keeps it and sends it after a reconnect, to the next broker of a
    list too) or refused: its own flag then says whether the ack came since."""
    try:
        return info.is_published()
    except (RuntimeError, ValueError):
        return bool(getattr(info, "_published", False))


def _wait_acked(info: MQTTMessageInfo, timeout: float) -> None:
    """Wait up to `timeout` for the ack, also of a message handed over while disconnected (whose
    `wait_for_publish` raises at once although paho sends it after the reconnect)."""
    try:
        info.wait_for_publish(timeout)
        return
    except ValueError:
        return  # never queued: it will never be acked
    except RuntimeError:
        pass
    condition = getattr(info, "_condition", None)
    if condition is None:
        return
    deadline = time.monotonic() + timeout
    with condition:
        while not _acked(info) and (left := deadline - time.monotonic()) > 0:
            condition.wait(min(left, 0.1))


class MqttClient:
    """One paho client with a background network thread. Use as a context manager.

    With a list of brokers (MQTT_BROKER=a,b,c: a cluster's nodes) it connects to the first that answers and,
    when the connection is lost or a reconnect fails, tries the next one, round the list. paho keeps every
    QoS 1 publish until it is acknowledged and sends it again on the new connection; `on_connect` subscribes
    again there."""

    def __init__(
        self,
        endpoint: BrokerEndpoint,
        *,
        client_id: str | None = None,
        will: Will | None = None,
        reconnect: bool = True,
    ) -> None:
        import paho.mqtt.client as paho
        from paho.mqtt.enums import CallbackAPIVersion

        self.endpoint = endpoint
        self._addresses = endpoint.addresses
        self._index = 0  # the broker in use (or being tried): self._addresses[self._index]
        self.client_id = client_id or f"mam-{uuid.uuid4().hex[:12]}"
        self._paho = paho
        self._client = paho.Client(
            CallbackAPIVersion.VERSION2,
            client_id=self.client_id,
            protocol=paho.MQTTv311,
            clean_session=True,
        )
        self._connected = threading.Event()
        self._answered = threading.Event()  # a CONNACK came, accepting or refusing
        # Each wanted topic: its QoS and its handlers (several callers in one process, e.g. a node's attempts
        # looking at one runner's presence at once, may want the same topic: each is told, none drops the others).
        self._subs: dict[str, tuple[int, list[Handler]]] = {}
        self._wildcards: set[str] = set()  # the keys of _subs with + or #: only these need matching
        self._lock = threading.Lock()
        self._reconnect = reconnect
        self._closing = False
        self._connect_error: str | None = None
        self.on_connection_change: Callable[[bool], None] | None = None
        if endpoint.username:
            self._client.username_pw_set(endpoint.username, endpoint.password or None)
        if endpoint.tls:
            self._tls_set(endpoint)
        if will is not None:
            self._client.will_set(will.topic, will.payload, qos=will.qos, retain=will.retain)
        self._client.reconnect_delay_set(min_delay=0.05, max_delay=1)  # type: ignore[arg-type]  # paho accepts seconds as float
        self._client.max_inflight_messages_set(100)
        self._client.max_queued_messages_set(0)
        self._client.on_connect = self._on_connect
        self._client.on_disconnect = self._on_disconnect
        self._client.on_connect_fail = self._on_connect_fail
        self._client.on_message = self._on_message
        self._client.on_subscribe = self._on_subscribe
        self._client.on_unsubscribe = self._on_subscribe  # the same bookkeeping: the packet id is acked
        # SUBACK / UNSUBACK bookkeeping by packet id. One Event per waiter, so an ack wakes only the
        # thread waiting for it: with a Condition shared by every waiter, each ack woke all of them
        # (a process driving 100 jobs on one connection), and the network thread queued behind them.
        self._acks_lock = threading.Lock()
        self._ack_waits: dict[int, threading.Event] = {}  # waited for now
        self._acked: set[int] = set()  # acked before anyone waited
        self._unwaited: set[int] = set()  # nobody will wait: drop the ack when it comes
        self._refused: set[int] = set()  # SUBACKs that said failure, until their subscriber has looked
        self._network_thread: int | None = None
        self._sub_mids: dict[int, str] = {}  # SUBACKs awaited: packet id -> topic (under _acks_lock)
        self._pending_lock = threading.Lock()
        self._pending: list[MQTTMessageInfo] = []  # publishes made with wait=False, until acked

    def _tls_set(self, ep: BrokerEndpoint) -> None:
        """Load the TLS files; a missing or unreadable one is a BrokerError naming the setting and its path."""

        for setting, path in (("MQTT_TLS_CA", ep.ca), ("MQTT_TLS_CERT", ep.cert), ("MQTT_TLS_KEY", ep.key)):
            if path and not os.access(path, os.R_OK):
                problem = "does not exist" if not os.path.exists(path) else "cannot be read"
                raise BrokerError(
                    f"{setting} file {path} {problem}; fix the path in .mam.env or the environment", setting=setting
                )
        try:
            self._client.tls_set(ca_certs=ep.ca or None, certfile=ep.cert or None, keyfile=ep.key or None)
        except (OSError, ssl.SSLError, ValueError) as e:
            raise BrokerError(
                f"cannot load the TLS files (MQTT_TLS_CA / MQTT_TLS_CERT / MQTT_TLS_KEY): {_plain(e)}"
            ) from e

    # -- connection ---------------------------------------------------------------------------
    @property
    def address(self) -> BrokerAddress:
        """The broker in use (or, while disconnected, the one tried next)."""
        return self._addresses[self._index]

    def _where(self) -> str:
        return str(self.address)

    def connect(self, timeout: float = 5.0) -> MqttClient:
        ep = self.endpoint
        self._answered.clear()
        self._connect_error = None
        failures: list[str] = []
        for index, address in enumerate(self._addresses):
            try:
                self._client.connect(address.host, address.port, keepalive=15)
            except (OSError, ValueError) as e:
                failures.append(f"{address}: {_plain(e)}")
                continue
            self._index = index
            break
        else:
            raise BrokerError(f"cannot connect to MQTT broker {'; '.join(failures)}")
        tried = self._where()  # (a refusal moves `address` on to the next broker before it is reported)
        if failures:
            log.info("MQTT broker(s) not reachable (%s); connected to %s", "; ".join(failures), tried)
        self._client.loop_start()
        # A refusal (bad password, ACL...) is final: report it at once instead of retrying until the timeout.
        if not self._wait_connected(timeout):
            refused = self._connect_error
            self.close()
            if refused:
                who = f" user {ep.username!r}" if ep.username else " an anonymous client"
                check = ""
                if refused in LOGIN_REFUSALS:
                    check = (
                        " (the embedded broker's password file changed since it started: "
                        "`mam broker stop && mam broker start`)"
                        if ep.embedded
                        else " (check MQTT_USERNAME and MQTT_PASSWORD)"
                    )
                raise BrokerError(f"MQTT broker {tried} refused{who}: {refused}{check}")
            hint = "" if ep.tls else "; if that port is a TLS listener, set MQTT_TLS=1"
            raise BrokerError(
                f"MQTT broker {tried} did not accept the connection within {timeout:.0f}s (no CONNACK{hint})"
            )
        return self

    def _wait_connected(self, timeout: float) -> bool:
        """Wait for the first CONNACK. With a list, a broker that refuses for another reason than the login (a
        cluster node not ready: "Server unavailable") is left for the next one (paho's reconnect goes there)."""
        if len(self._addresses) < 2 or not self._reconnect:
            return self._answered.wait(timeout) and self._connected.is_set()
        deadline = time.monotonic() + timeout
        while not self._connected.wait(min(0.05, max(0.0, deadline - time.monotonic()))):
            if self._connect_error in LOGIN_REFUSALS or time.monotonic() >= deadline:
                return False
        return True

    @property
    def connected(self) -> bool:
        return self._connected.is_set()

    def wait_connected(self, timeout: float) -> bool:
        return self._connected.wait(timeout)

    def close(self, flush_s: float = 3.0) -> None:
        """Disconnect, after waiting up to `flush_s` for the acks of publishes made with `wait=False`."""
        unacked = self.flush(flush_s) if self._connected.is_set() else len(self._unacked())
        if unacked:
            log.warning(
                "MQTT broker %s did not acknowledge %d publish(es) within %gs before the connection closed",
                self._where(),
                unacked,
                flush_s,
            )
        self._closing = True
        try:
            # Always: paho's network thread keeps running while an unacked message waits for a
            # reconnect, so only a DISCONNECT (or no socket at all) lets loop_stop return at once.
            self._client.disconnect()
        finally:
            self._client.loop_stop()
            self._connected.clear()

    def __enter__(self) -> MqttClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- messaging ----------------------------------------------------------------------------
    def publish(
        self,
        topic: str,
        payload: bytes,
        *,
        qos: int = 1,
        retain: bool = False,
        timeout: float = 5.0,
        give_up_on_disconnect: bool = False,
        wait: bool = True,
    ) -> None:
        """Publish and, for QoS > 0, wait for the broker's ack; raise BrokerError if it does not come.

        A BrokerError after the message left means "maybe sent": paho keeps an unacked message and
        sends it again after a reconnect. By default the wait goes on through a reconnect until
        `timeout`; `give_up_on_disconnect` stops it when the connection drops (for messages that
        are safe on disk already, whose sender must not be held up). `wait=False`: return once the
        message is queued; `flush` (and `close`) wait for its ack.
        """
        if not self._connected.is_set():
            raise BrokerError(f"not connected to MQTT broker {self._where()}")
        info = self._client.publish(topic, payload, qos=qos, retain=retain)
        if info.rc != self._paho.MQTT_ERR_SUCCESS:
            raise BrokerError(f"publish to {self._where()} failed: {self._paho.error_string(info.rc)}")
        if qos > 0 and not wait:
            with self._pending_lock:
                self._pending = [i for i in self._pending if not _acked(i)]
                self._pending.append(info)
            return
        if qos > 0:
            # With give_up_on_disconnect, wait in slices so that a lost connection ends the wait early.
            deadline = time.monotonic() + timeout
            try:
                while not info.is_published():
                    left = deadline - time.monotonic()
                    if left <= 0:
                        raise Unacknowledged(
                            f"MQTT broker {self._where()} did not acknowledge a publish within {timeout:g}s"
                        )
                    if give_up_on_disconnect and not self._connected.is_set():
                        raise Unacknowledged(
                            f"lost the connection to MQTT broker {self._where()} before it acknowledged a publish"
                        )
                    info.wait_for_publish(min(0.2, left) if give_up_on_disconnect else left)
            except (RuntimeError, ValueError) as e:
                raise BrokerError(f"publish failed: {e}") from e

    def flush(self, timeout: float) -> int:
        """Wait up to `timeout` for the acks of every publish made with `wait=False`; how many are still unacked."""
        deadline = time.monotonic() + timeout
        for info in self._unacked():
            left = deadline - time.monotonic()
            if left <= 0:
                break
            _wait_acked(info, left)  # (one never queued is counted as unacked below)
        return len(self._unacked())

    def _unacked(self) -> list[MQTTMessageInfo]:
        with self._pending_lock:
            self._pending = [i for i in self._pending if not _acked(i)]
            return list(self._pending)

    def publish_nowait(self, topic: str, payload: bytes, *, qos: int = 1) -> None:
        """Hand a message to paho without waiting for the broker's ack (a relay of what is safe on disk).

        paho keeps a QoS 1 message until it is acknowledged and sends it again after a reconnect; one
        handed over while disconnected goes out once the connection is back. Raises BrokerError only
        when paho refuses the message outright."""
        info = self._client.publish(topic, payload, qos=qos)
        if info.rc not in (self._paho.MQTT_ERR_SUCCESS, self._paho.MQTT_ERR_NO_CONN):
            raise BrokerError(f"publish to {self._where()} failed: {self._paho.error_string(info.rc)}")
        if qos > 0:  # `flush` and `close` wait for it too
            with self._pending_lock:
                self._pending = [i for i in self._pending if not _acked(i)]
                self._pending.append(info)

    def subscribe(
        self, topic: str, handler: Handler, *, qos: int = SUBSCRIBE_QOS, timeout: float = 5.0, wait: bool = True
    ) -> bool:
        """Want `topic` for `handler` and wait for the SUBACK: False if the broker refused it (it is tried
        again shortly while wanted: a NATS node without a JetStream leader refuses for a while), else True.
        `wait=False`: return once the SUBSCRIBE is sent (True); a refusal is still tried again while wanted."""
        with self._lock:
            held = self._subs.get(topic)
            if held is None:
                self._subs[topic] = (qos, [handler])
            elif handler not in held[1]:  # (a handler subscribed again is told once: bound methods compare equal)
                self._subs[topic] = (max(qos, held[0]), [*held[1], handler])
            if "+" in topic or "#" in topic:
                self._wildcards.add(topic)
        if self._connected.is_set():
            rc, mid = self._client.subscribe(topic, qos=qos)
            if rc != self._paho.MQTT_ERR_SUCCESS or mid is None:
                raise BrokerError(f"subscribe to {topic} failed: {self._paho.error_string(rc)}")
            self._note_subscribe(mid, topic)
            if not wait:
                self._forget_ack(mid)
                return True
            # Wait for the SUBACK: a caller that subscribes and then acts (injects a brief) must not
            # race the first message. (With MQTT 3.1.1 an ACL denial still acks: docs/broker.md,
            # "What mam's code relies on, as measured".)
            if not self._wait_ack(mid, timeout):
                raise BrokerError(
                    f"MQTT broker {self._where()} did not acknowledge a subscription within {timeout:.0f}s"
                )
            with self._acks_lock:
                if mid in self._refused:
                    self._refused.discard(mid)
                    return False
        return True

    def unsubscribe(
        self, topic: str, handler: Handler | None = None, *, timeout: float = 5.0, wait: bool = True
    ) -> None:
        """Stop receiving `topic` (only for `handler` when given: the topic stays subscribed while another
        handler wants it); waits (at most `timeout`, never failing) for the UNSUBACK, so that
        a close right after never leaves the broker's answer unread (closing a socket with unread
        data resets the connection, and the broker may then drop our DISCONNECT and send our will).
        `wait=False`: do not wait (the connection stays open, as a shared one does)."""
        with self._lock:
            held = self._subs.get(topic)
            if held is not None and handler is not None:
                rest = list(held[1])
                if handler in rest:
                    rest.remove(handler)
                if rest:
                    self._subs[topic] = (held[0], rest)
                    return
            self._subs.pop(topic, None)
            self._wildcards.discard(topic)
        if self._connected.is_set():
            rc, mid = self._client.unsubscribe(topic)
            if rc != self._paho.MQTT_ERR_SUCCESS or mid is None:
                return
            if not wait or threading.get_ident() == self._network_thread:
                self._forget_ack(mid)  # (a handler on the network thread must not wait for what that thread reads)
                return
            self._wait_ack(mid, timeout)

    def _wait_ack(self, mid: int, timeout: float) -> bool:
        """Wait for the SUBACK or UNSUBACK of packet `mid`: True once it came or the connection dropped
        (on_connect subscribes again), False after `timeout`."""
        with self._acks_lock:
            if mid in self._acked:
                self._acked.discard(mid)
                return True
            event = self._ack_waits[mid] = threading.Event()
        try:
            return event.wait(timeout) or not self._connected.is_set()
        finally:
            with self._acks_lock:
                self._ack_waits.pop(mid, None)
                if not event.is_set():
                    self._unwaited.add(mid)  # a late ack must not satisfy a later wait for a reused id

    def _forget_ack(self, mid: int) -> None:
        with self._acks_lock:
            self._refused.discard(mid)
            if mid in self._acked:
                self._acked.discard(mid)
            else:
                self._unwaited.add(mid)

    # -- paho callbacks (network thread) ------------------------------------------------------
    def _on_connect(self, client, _userdata, _flags, reason_code, _properties) -> None:  # type: ignore[no-untyped-def]
        self._network_thread = threading.get_ident()
        if reason_code.is_failure:
            self._connect_error = str(reason_code)
            self._answered.set()
            if not self._reconnect:
                client.disconnect()
            return
        try:
            sock = client.socket()
            if sock is not None:
                sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        except OSError:
            pass
        with self._lock:
            subs = list(self._subs.items())
        for topic, (qos, _h) in subs:
            _rc, mid = client.subscribe(topic, qos=qos)
            self._note_subscribe(mid, topic)
            if mid is not None:
                self._forget_ack(mid)  # nobody waits for these SUBACKs (a refusal still schedules another try)
        self._connected.set()
        self._answered.set()
        if self.on_connection_change is not None:
            self.on_connection_change(True)

    def _next_broker(self, client) -> None:  # type: ignore[no-untyped-def]
        """Point paho's next reconnect at the next broker of the list (a no-op with one broker)."""
        if len(self._addresses) < 2 or self._closing:
            return
        lost = self._where()
        self._index = (self._index + 1) % len(self._addresses)
        # paho's host/port setters refuse while its state is "connection lost"; its reconnect reads these.
        client._host, client._port = self.address.host, self.address.port
        log.info("MQTT broker %s lost or unreachable; trying %s", lost, self._where())

    def _on_connect_fail(self, client, _userdata) -> None:  # type: ignore[no-untyped-def]
        self._next_broker(client)

    def _on_disconnect(self, client, _userdata, _flags, _reason_code, _properties) -> None:  # type: ignore[no-untyped-def]
        self._connected.clear()
        self._next_broker(client)
        with self._acks_lock:
            for event in self._ack_waits.values():
                event.set()  # a subscriber waiting for its SUBACK stops waiting; on_connect resubscribes
        if not self._closing and self.on_connection_change is not None:
            self.on_connection_change(False)

    def _note_subscribe(self, mid: int | None, topic: str) -> None:
        if mid is not None:
            with self._acks_lock:
                self._sub_mids[mid] = topic

    def _subscribe_again(self, topic: str) -> None:
        """A refused subscription, tried again (timer thread) while it is still wanted and the connection is up."""
        with self._lock:
            wanted = self._subs.get(topic)
        if wanted is None or self._closing or not self._connected.is_set():
            return  # (a reconnect subscribes to every wanted topic again anyway)
        rc, mid = self._client.subscribe(topic, qos=wanted[0])
        if rc == self._paho.MQTT_ERR_SUCCESS and mid is not None:
            self._note_subscribe(mid, topic)
            self._forget_ack(mid)  # nobody waits for this one's SUBACK (a refusal again schedules another try)

    def _on_subscribe(self, _client, _userdata, mid, reason_codes, _properties) -> None:  # type: ignore[no-untyped-def]
        with self._acks_lock:
            topic = self._sub_mids.pop(mid, None)
        # A SUBACK may refuse (0x80): a NATS node whose JetStream has no leader yet after another node's loss
        # refuses the consumer behind a subscription. Nothing would ever arrive on it: try again shortly.
        refused = topic is not None and any(getattr(rc, "is_failure", False) for rc in reason_codes or ())
        if refused:
            log.warning("MQTT broker %s refused the subscription to %s; trying again", self._where(), topic)
            timer = threading.Timer(SUBSCRIBE_RETRY_S, self._subscribe_again, (topic,))
            timer.daemon = True
            timer.start()
        with self._acks_lock:
            event = self._ack_waits.get(mid)
            if mid in self._unwaited:
                self._unwaited.discard(mid)
                return
            if refused:
                self._refused.add(mid)  # the subscriber reads it once it has its ack (subscribe's answer)
            if event is not None:
                event.set()
            else:
                self._acked.add(mid)

    def _on_message(self, _client, _userdata, msg) -> None:  # type: ignore[no-untyped-def]
        # A dict lookup for the exact topic and a match only against wildcard patterns: this runs on
        # the network thread for every message, and a process driving many jobs on one connection
        # has one subscription per job (paho's topic_matches_sub builds a matcher per call, ~12 us).
        with self._lock:
            exact = self._subs.get(msg.topic)
            handlers = list(exact[1]) if exact is not None else []
            for p in self._wildcards:
                if self._paho.topic_matches_sub(p, msg.topic):
                    handlers += self._subs[p][1]
        for handler in handlers:
            try:
                handler(msg.topic, msg.payload, bool(msg.retain))
            except Exception:  # a bad message must never kill the network thread
                log.exception("message handler failed on %s", msg.topic)


def _plain(e: BaseException) -> str:
    text = str(e) or type(e).__name__
    return text
