"""mam against the private broker docs/broker.md describes: TLS, passwords and a topic ACL per role.

The broker is Mosquitto rendered from docs/broker/*.tmpl (tests/helpers/secure_broker.py).
MQTT 3.1.1 ACL denials are silent (SUBACK and PUBACK still come), so every ACL check here is
about delivery: a positive control published later on the same connection must arrive, and
the denied message must not have arrived with it nor within a bounded wait after it.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import ExitStack
from pathlib import Path

import pytest

from mam.broker.endpoint import BrokerEndpoint
from mam.bus.envelope import Envelope
from mam.bus.mqtt import MqttClient, Will
from mam.bus.topics import Topics
from mam.errors import BrokerError
from mam.util.poll import wait_for
from tests.helpers.jobs import registered_session
from tests.helpers.secure_broker import SecureBroker, start_secure_broker

QUIET_S = 0.5  # how long a denied message gets to show up after its positive control did
PROBE = b"probe-"


class Inbox:
    """Messages one client received, in order, with a way to wait for one."""

    def __init__(self) -> None:
        self.items: list[tuple[str, bytes, bool]] = []
        self._cond = threading.Condition()

    def __call__(self, topic: str, payload: bytes, retained: bool) -> None:
        with self._cond:
            self.items.append((topic, payload, retained))
            self._cond.notify_all()

    def topics(self) -> list[str]:
        """Topics received, leaving out the probes `until_subscribed` sent."""
        with self._cond:
            return [t for t, p, _r in self.items if not p.startswith(PROBE)]

    def clear(self) -> None:
        with self._cond:
            self.items.clear()

    def payloads(self, topic: str) -> list[bytes]:
        with self._cond:
            return [p for t, p, _r in self.items if t == topic]

    def wait(self, check: Callable[[], bool], timeout: float) -> bool:
        with self._cond:
            return self._cond.wait_for(check, timeout)


@pytest.fixture
def clients() -> Iterator[Callable[..., MqttClient]]:
    """connect(endpoint, **kw): a connected MqttClient, closed after the test."""
    with ExitStack() as stack:

        def connect(endpoint: BrokerEndpoint, **kw: object) -> MqttClient:
            return stack.enter_context(MqttClient(endpoint, **kw).connect(timeout=5))

        yield connect


def unique() -> str:
    return f"job-{uuid.uuid4().hex[:16]}"


def until_subscribed(publisher: MqttClient, topic: str, inbox: Inbox) -> None:
    """MqttClient.subscribe does not wait for the SUBACK: probe until the subscription delivers."""
    probe = PROBE + uuid.uuid4().hex.encode()

    def arrived() -> bool:
        publisher.publish(topic, probe, qos=1)
        return inbox.wait(lambda: probe in inbox.payloads(topic), 0.2)

    wait_for(arrived, timeout=10, interval=0, message=f"subscription to {topic} never delivered")


# -- TLS and passwords --------------------------------------------------------------------------
def test_tls_with_password_publishes_and_receives(secure_broker: SecureBroker, clients) -> None:
    topics = Topics(secure_broker.prefix)
    orc = clients(secure_broker.endpoint("orchestrator"))
    inbox = Inbox()
    topic = topics.events(unique())
    orc.subscribe(topic, inbox)
    until_subscribed(orc, topic, inbox)
    runner = clients(secure_broker.endpoint("runner-a"))
    runner.publish(topic, b"over tls", qos=1)
    assert inbox.wait(lambda: b"over tls" in inbox.payloads(topic), 5)


def test_localhost_matches_the_certificate_too(secure_broker: SecureBroker, clients) -> None:
    clients(secure_broker.endpoint("orchestrator", host="localhost"))


def test_mutual_tls_needs_the_client_certificate(tmp_path: Path, secure_broker: SecureBroker, clients) -> None:
    # `secure_broker` only makes the test skip where Mosquitto or openssl are missing.
    b = start_secure_broker(tmp_path / "mtls", plain_listener=False, require_client_cert=True)
    try:
        clients(b.endpoint("orchestrator", client_cert=True))
        with pytest.raises(BrokerError) as info:
            MqttClient(b.endpoint("orchestrator", client_cert=False), reconnect=False).connect(timeout=2)
        assert str(b.endpoint().port) in str(info.value)
        assert b.passwords["orchestrator"] not in str(info.value)
    finally:
        b.stop()


@pytest.mark.parametrize(
    "user, password", [("runner-a", "not-the-password"), ("runner-a", ""), ("nobody", "pw-nobody")]
)
def test_wrong_password_is_refused_at_once_with_a_clear_error(
    secure_broker: SecureBroker, user: str, password: str
) -> None:
    started = time.monotonic()
    with pytest.raises(BrokerError) as info:
        MqttClient(secure_broker.endpoint(user, password=password)).connect(timeout=10)
    elapsed = time.monotonic() - started
    text = str(info.value)
    assert f"{secure_broker.host}:{secure_broker.tls_port}" in text and "refused" in text and "MQTT_PASSWORD" in text, (
        text
    )
    assert elapsed < 5, f"a refusal took {elapsed:.1f}s: it should not wait for the timeout"
    for secret in (password, *secure_broker.passwords.values()):
        if secret:
            assert secret not in text
    assert info.value.exit_code == 3


def test_plain_tcp_to_the_tls_port_fails_clearly(secure_broker: SecureBroker) -> None:
    ep = secure_broker.endpoint("orchestrator", tls=False, port=secure_broker.tls_port)
    with pytest.raises(BrokerError) as info:
        MqttClient(ep, reconnect=False).connect(timeout=2)
    text = str(info.value)
    assert f":{secure_broker.tls_port}" in text and "MQTT_TLS=1" in text, text
    assert secure_broker.passwords["orchestrator"] not in text


def test_tls_to_the_plain_port_fails_clearly(secure_broker: SecureBroker) -> None:
    assert secure_broker.plain_port is not None
    with pytest.raises(BrokerError) as info:
        MqttClient(secure_broker.endpoint("orchestrator", port=secure_broker.plain_port)).connect(timeout=3)
    assert f":{secure_broker.plain_port}" in str(info.value)


def test_a_server_certificate_from_an_unknown_ca_is_refused(secure_broker: SecureBroker) -> None:
    # The client certificate file is not a CA: nothing it holds signed the server's certificate.
    ep = secure_broker.endpoint("orchestrator", ca=str(secure_broker.pki.client_cert))
    with pytest.raises(BrokerError) as info:
        MqttClient(ep).connect(timeout=3)
    assert "certificate verify failed" in str(info.value)


def test_the_plain_listener_still_wants_the_password(secure_broker: SecureBroker, clients) -> None:
    clients(secure_broker.endpoint("runner-b", tls=False))
    with pytest.raises(BrokerError, match="refused"):
        MqttClient(secure_broker.endpoint("runner-b", tls=False, password="wrong")).connect(timeout=5)
    with pytest.raises(BrokerError, match="refused"):
        MqttClient(BrokerEndpoint(secure_broker.host, secure_broker.plain_port or 0)).connect(timeout=5)  # anonymous


# -- the ACL ------------------------------------------------------------------------------------
def test_a_runner_cannot_read_another_runners_dispatch_nor_presence_nor_job_events(
    secure_broker: SecureBroker, clients
) -> None:
    topics = Topics(secure_broker.prefix)
    job_b, job_a, job = unique(), unique(), unique()
    orc = clients(secure_broker.endpoint("orchestrator"))
    spy, spy_wild = Inbox(), Inbox()
    runner_a = clients(secure_broker.endpoint("runner-a"))
    # Denied subscriptions first; SUBSCRIBEs on one connection are handled in order, so once the
    # allowed one (last) delivers, the denied ones are in place too.
    for denied in (topics.dispatch_all("runner-b"), topics.all_events(), topics.all_presence()):
        runner_a.subscribe(denied, spy)
    runner_a.subscribe(f"{secure_broker.prefix}/#", spy_wild)
    own, states = Inbox(), Inbox()
    runner_a.subscribe(topics.all_states(), states)  # allowed: the origin's final word on a job
    runner_a.subscribe(topics.dispatch_all("runner-a"), own)
    until_subscribed(orc, topics.dispatch("runner-a", "probe"), own)
    runner_b = clients(secure_broker.endpoint("runner-b"))
    theirs = Inbox()
    runner_b.subscribe(topics.dispatch_all("runner-b"), theirs)
    until_subscribed(orc, topics.dispatch("runner-b", "probe"), theirs)
    spy.clear()
    spy_wild.clear()

    secret_brief = b"the brief meant for runner-b only"
    orc.publish(topics.dispatch("runner-b", job_b), secret_brief, qos=1)  # PUBACKed like any other
    orc.publish(topics.events(job), b"an event", qos=1)
    orc.publish(topics.presence("runner-b"), b"runner-b online", qos=1)
    orc.publish(topics.state(job), b"a state", qos=1)
    orc.publish(topics.dispatch("runner-a", job_a), b"for runner-a", qos=1)  # the positive control, sent last

    assert theirs.wait(lambda: secret_brief in theirs.payloads(topics.dispatch("runner-b", job_b)), 5), (
        "runner-b never got its dispatch"
    )
    assert own.wait(lambda: b"for runner-a" in own.payloads(topics.dispatch("runner-a", job_a)), 5), (
        "runner-a never got its dispatch"
    )
    assert states.wait(lambda: topics.state(job) in states.topics(), 5), "runner-a never got the job state"
    assert not spy.wait(lambda: bool(spy.topics()), QUIET_S), f"runner-a read a denied topic: {spy.topics()}"
    mine = [topics.state(job), topics.dispatch("runner-a", job_a)]
    assert spy_wild.wait(lambda: spy_wild.topics() == mine, 5), spy_wild.topics()
    assert not spy_wild.wait(lambda: spy_wild.topics() != mine, QUIET_S), spy_wild.topics()


def test_a_runner_cannot_publish_outside_its_area(secure_broker: SecureBroker, clients) -> None:
    topics = Topics(secure_broker.prefix)
    job = unique()
    orc = clients(secure_broker.endpoint("orchestrator"))
    seen = Inbox()
    orc.subscribe(f"{secure_broker.prefix}/#", seen)
    until_subscribed(orc, topics.events(f"probe-{job}"), seen)
    seen.clear()
    runner_a = clients(secure_broker.endpoint("runner-a"))
    denied = [
        topics.dispatch("runner-b", job),
        topics.presence("runner-b"),
        topics.state(job),
        f"{secure_broker.prefix}/jobs/{job}/other",
        f"{secure_broker.prefix}/elsewhere",
    ]
    for topic in denied:
        runner_a.publish(topic, b"forged", qos=1)  # no error: MQTT 3.1.1 acks a denied publish
    allowed = [topics.events(job), topics.dispatch("runner-a", job), topics.presence("runner-a")]
    for topic in allowed:  # the positive controls, on the same connection, after the denied ones
        runner_a.publish(topic, b"fine", qos=1)

    assert seen.wait(lambda: all(t in seen.topics() for t in allowed), 5), f"allowed messages missing: {seen.topics()}"
    assert not seen.wait(lambda: any(t in denied for t in seen.topics()), QUIET_S), (
        f"denied publishes arrived: {seen.topics()}"
    )
    assert seen.topics() == allowed


def test_a_runners_last_will_reaches_its_own_presence_topic_only(secure_broker: SecureBroker, clients) -> None:
    topics = Topics(secure_broker.prefix)
    orc = clients(secure_broker.endpoint("orchestrator"))
    seen = Inbox()
    orc.subscribe(topics.all_presence(), seen)
    until_subscribed(orc, topics.presence("probe"), seen)
    seen.clear()
    own = MqttClient(
        secure_broker.endpoint("runner-a"), will=Will(topics.presence("runner-a"), b"offline-a", retain=False)
    ).connect(5)
    forged = MqttClient(
        secure_broker.endpoint("runner-a"), will=Will(topics.presence("runner-b"), b"offline-b", retain=False)
    ).connect(5)
    try:
        for c in (forged, own):  # vanish without DISCONNECT, as a crashed runner would
            sock = c._client.socket()  # paho's socket: the only way to drop a connection uncleanly
            assert sock is not None
            sock.shutdown(socket.SHUT_RDWR)
        assert seen.wait(lambda: b"offline-a" in seen.payloads(topics.presence("runner-a")), 10), seen.topics()
        assert not seen.wait(lambda: topics.presence("runner-b") in seen.topics(), QUIET_S), seen.topics()
    finally:
        own.close()
        forged.close()


# -- secrets never printed ----------------------------------------------------------------------
def run_mam(*args: str, ws: Path, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    full = {k: v for k, v in os.environ.items() if not k.startswith(("MQTT_", "MAM_"))}
    full.update(MAM_WORKSPACE=str(ws), MAM_NO_AUTOSTART="1", MAM_LOG_LEVEL="DEBUG", **env)
    return subprocess.run(
        [sys.executable, "-m", "mam", *args], cwd=ws, env=full, capture_output=True, text=True, timeout=60, check=False
    )


def files_holding(root: Path, secret: str) -> list[str]:
    return [str(p) for p in root.rglob("*") if p.is_file() and secret.encode() in p.read_bytes()]


def register_job(ws: Path, prefix: str) -> tuple[str, str]:
    """A pending job in `ws` (as `mam job delegate` registers it); returns (job id, token)."""
    from mam.jobs.ledger import Ledger, new_job_id, new_owner
    from mam.jobs.model import Job
    from mam.jobs.record import now_ms
    from mam.store.registry import Registry
    from mam.workspace import Workspace

    w = Workspace(ws)
    registry = Registry(w)
    try:
        job = Job(
            id=new_job_id(),
            session="worker",
            nonce="n0nce",
            created_ms=now_ms(),
            start_deadline_ms=60_000,
            heartbeat_ms=30_000,
            heartbeat_k=4,
            budget_ms=600_000,
        )
        ledger = Ledger.register(
            w, registry, job, owner=new_owner(), meta={"target": "worker", "kind": "job", "topic_prefix": prefix}
        )
        return job.id, ledger.token
    finally:
        registry.close()


@pytest.fixture
def ws(tmp_path: Path) -> Path:
    root = tmp_path / "ws"
    root.mkdir()
    return root


def test_mam_config_never_prints_the_password(ws: Path) -> None:
    password = f"pw-config-{uuid.uuid4().hex}"
    (ws / ".mam.env").write_text(f"MQTT_USERNAME=orchestrator\nMAM_DISPATCH_SECRET=ds-{password}\n")
    for args in (("config",), ("config", "--json")):
        r = run_mam(*args, ws=ws, env={"MQTT_PASSWORD": password})
        assert r.returncode == 0, r.stderr
        assert password not in r.stdout + r.stderr
        assert "***" in r.stdout
    rows = {
        row["key"]: row
        for row in json.loads(run_mam("config", "--json", ws=ws, env={"MQTT_PASSWORD": password}).stdout)["settings"]
    }
    assert rows["MQTT_PASSWORD"]["value"] == "***" and rows["MQTT_PASSWORD"]["source"] == "environment"
    assert rows["MAM_DISPATCH_SECRET"]["value"] == "***"


def test_mam_event_over_tls_publishes_a_verifiable_event_and_never_prints_the_password(
    secure_broker: SecureBroker, clients, ws: Path
) -> None:
    job_id, token = register_job(ws, secure_broker.prefix)
    topic = Topics(secure_broker.prefix).events(job_id)
    orc = clients(secure_broker.endpoint("orchestrator"))
    inbox = Inbox()
    orc.subscribe(topic, inbox)
    until_subscribed(orc, topic, inbox)
    inbox.clear()
    env = secure_broker.env("runner-a")  # an agent on a runner host logs in as its runner
    (ws / ".mam.env").write_text("".join(f"{k}={v}\n" for k, v in env.items()))

    r = run_mam("event", "progress", "--job", job_id, "--message", "half way ✓", ws=ws, env={})
    assert r.returncode == 0, r.stderr
    assert "published" in r.stdout, r.stdout + r.stderr
    assert inbox.wait(lambda: bool(inbox.topics()), 5)
    env_msg = Envelope.decode(next(p for _t, p, _r in inbox.items if not p.startswith(PROBE)))
    assert (
        env_msg.verify(token)
        and env_msg.type == "progress"
        and env_msg.body == {"message": "half way ✓"}
        and env_msg.seq == 1
    )
    password = env["MQTT_PASSWORD"]
    assert password not in r.stdout + r.stderr
    assert files_holding(ws / ".mam", password) == []


def test_mam_event_with_a_wrong_password_keeps_the_event_on_disk_and_prints_no_password(
    secure_broker: SecureBroker, ws: Path
) -> None:
    job_id, _token = register_job(ws, secure_broker.prefix)
    wrong = f"pw-wrong-{uuid.uuid4().hex}"
    env = secure_broker.env("orchestrator", password=wrong)
    started = time.monotonic()
    r = run_mam("event", "progress", "--job", job_id, "--message", "hello", ws=ws, env=env)
    assert r.returncode == 0, r.stderr
    assert "on disk only" in r.stdout
    # (The CLI prints the emitter's "no broker connection" rather than the refusal itself; see the report.)
    assert "warning" in r.stderr, r.stderr
    assert time.monotonic() - started < 20
    for secret in (wrong, *secure_broker.passwords.values()):
        assert secret not in r.stdout + r.stderr
        assert files_holding(ws / ".mam", secret) == []


def test_job_delegate_with_a_refused_login_exits_3_and_prints_no_password(
    secure_broker: SecureBroker, ws: Path
) -> None:
    wrong = f"pw-wrong-{uuid.uuid4().hex}"
    registered_session(ws, "w")  # a target that exists: the broker is what refuses
    r = run_mam(
        "job",
        "delegate",
        "--target",
        "tmux:w",
        "--brief",
        "hello",
        "--json",
        ws=ws,
        env=secure_broker.env("orchestrator", password=wrong),
    )
    assert r.returncode == 3, r.stdout + r.stderr
    out = json.loads(r.stdout)
    assert out["reason"] == "broker_unavailable" and "refused" in out["detail"]
    for secret in (wrong, *secure_broker.passwords.values()):
        assert secret not in r.stdout + r.stderr
        assert files_holding(ws / ".mam", secret) == []
