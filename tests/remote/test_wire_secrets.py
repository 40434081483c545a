"""Nothing on the wire lets a reader of the broker sign for a job.

A spy subscribed to `#` on the real broker records every message of a remote job (the retained
presence and dispatch, the relayed events), then signs a `completed` for the job with every value
it saw and publishes each one before the agent's real `completed`. All of them are rejected: the
job ends with the agent's own result, and the origin's audit log holds the spy's attempts as
`bad_signature`.
"""

from __future__ import annotations

import json
import threading
import uuid
from collections.abc import Iterator
from typing import Any

import paho.mqtt.client as paho

from mam.bus.envelope import Envelope
from mam.bus.topics import Topics
from mam.errors import DecodeError
from mam.jobs.record import now_ms
from tests.remote.test_remote_jobs import INSECURE, runner_started, start_runner

FORGED = "forged by the spy"


class Spy:
    def __init__(self, host: str, port: int) -> None:
        self.seen: list[tuple[str, bytes]] = []
        self.lock = threading.Lock()
        subscribed = threading.Event()
        self.client = paho.Client(paho.CallbackAPIVersion.VERSION2, protocol=paho.MQTTv311)
        self.client.on_message = self._on_message
        self.client.on_subscribe = lambda *_a: subscribed.set()
        self.client.connect(host, port)
        self.client.loop_start()
        self.client.subscribe("#", qos=1)
        assert subscribed.wait(10), "the spy's subscription to # was not acknowledged"

    def _on_message(self, _c: Any, _u: Any, msg: paho.MQTTMessage) -> None:
        with self.lock:
            self.seen.append((msg.topic, bytes(msg.payload)))

    def messages(self) -> list[tuple[str, bytes]]:
        with self.lock:
            return list(self.seen)

    def close(self) -> None:
        self.client.loop_stop()
        self.client.disconnect()


def strings_in(value: Any) -> Iterator[str]:
    """Every value a reader could try as a key: each string, number, key, line and word in a message."""
    if isinstance(value, dict):
        for k, v in value.items():
            yield from strings_in(k)
            yield from strings_in(v)
    elif isinstance(value, list):
        for v in value:
            yield from strings_in(v)
    elif isinstance(value, str):
        yield value
        yield from value.splitlines()
        yield from value.split()
    elif value is not None:
        yield str(value)


def candidates(messages: list[tuple[str, bytes]]) -> set[str]:
    found: set[str] = set()
    for topic, payload in messages:
        found.add(topic)
        found.update(topic.split("/"))
        text = payload.decode("utf-8", "replace")
        found.add(text)
        try:
            found.update(strings_in(json.loads(text)))
        except ValueError:
            pass
    found.discard("")
    return found


def event_type(payload: bytes) -> str:
    try:
        return Envelope.decode(payload).type
    except DecodeError:
        return ""


def test_a_spy_on_the_broker_cannot_sign_for_a_remote_job(two_hosts, mosquitto_broker, poll):
    origin, remote = two_hosts(mosquitto_broker.env())
    spy = Spy(mosquitto_broker.host, mosquitto_broker.port)
    try:
        remote.mam("session", "create", "--agent", "demo", "--role", "dev", "--session", "d1", "--json")
        start_runner(remote)
        runner_started(remote, poll)
        job_id = f"job-{uuid.uuid4().hex[:16]}"
        events_topic = Topics(origin.env["MAM_TOPIC_PREFIX"]).events(job_id)
        wrapper = origin.spawn(
            "job",
            "delegate",
            "--target",
            "remote:rb/d1",
            "--brief",
            "demo-sleep: 5",
            "--job-id",
            job_id,
            "--start-deadline",
            "30",
            "--heartbeat",
            "2",
            *INSECURE,
            "--json",
        )

        def relayed(kind: str) -> list[bytes]:
            return [p for t, p in spy.messages() if t == events_topic and event_type(p) == kind]

        poll(
            lambda: relayed("started"),
            timeout=30,
            message=lambda: f"no started relayed; spy saw {[t for t, _ in spy.messages()]}",
        )
        assert any("/dispatch/" in t and job_id in t for t, p in spy.messages() if p), (
            "the spy did not see the dispatch"
        )
        tried = candidates(spy.messages())
        last_seq = max(Envelope.decode(p).seq for p in relayed("started"))
        forged = []
        for key in sorted(tried):
            env = Envelope(
                kind="event",
                job=job_id,
                seq=last_seq + 5,
                type="completed",
                sender="agent",
                ts=now_ms(),
                body={"message": FORGED},
            )
            forged.append(env.signed(key).encode())
        # All handed to paho at once, then their acks awaited: one at a time, each waited for a round trip
        # (~40 ms where a client both publishes and receives QoS 1 without TCP_NODELAY), and the last of a
        # hundred came after the agent's own `completed`.
        sent = [spy.client.publish(events_topic, payload, qos=1) for payload in forged]
        for info in sent:
            info.wait_for_publish(5)
        out, err = wrapper.communicate(timeout=90)

        assert wrapper.returncode == 0, err
        record = json.loads(out)
        assert record["state"] == "completed" and FORGED not in out, out
        # The forgeries reached subscribers before the agent's own `completed`: had any of them been
        # signed right, it would have ended the job.
        order = [p for t, p in spy.messages() if t == events_topic]
        real = [i for i, p in enumerate(order) if event_type(p) == "completed" and p not in forged]
        assert real and all(order.index(p) < real[0] for p in forged), "the forgeries came too late to prove anything"
        token = json.loads((origin.root / ".mam" / "jobs" / f"{job_id}.json").read_text())["token"]
        assert token not in tried and len(tried) > 20
        audit = [
            json.loads(line)
            for line in (origin.root / ".mam" / "delegate_job_logs" / job_id / "audit.jsonl").read_text().splitlines()
        ]
        assert any(a["kind"] == "rejected" and a.get("reason") == "bad_signature" for a in audit)
    finally:
        spy.close()
