"""Event path throughput: mam's signed event path against raw paho QoS 1, on the same private broker.

Usage: python bench/event_path.py [--messages 5000] [--window 100] [--rounds 5] [--amqtt-rounds 1] [--remote]
                                  [--state-dir DIR] [--json]

Both rows move the same number of messages of the same size from one publisher client to one
subscriber client through a private broker (Mosquitto on a free loopback port, started and
stopped by this script; amqtt as a second, informational row). Both use the same pipeline: at
most `--window` messages published but not yet taken by the receiver, QoS 1 throughout, and the
same paho transport settings (MQTT 3.1.1, TCP_NODELAY, an in-flight limit of `--window`).

  raw  publisher: paho publish of an opaque payload; subscriber: paho on_message counts it.
  mam  publisher: build the event envelope, sign it with the job token (HMAC-SHA256), publish.
       subscriber: mam's MqttClient + the wrapper's Intake and follow loop, as `mam job delegate`
       runs them: gate check (size, JSON, shape, signature, sender, seq), then the Ledger
       (registry row compare-and-set, 0600 live record, one audit line per event). With
       `--remote`, also store each event (a remote job's wrapper does; a local one finds the
       agent's own copy on disk).

Prints msgs/s for both, their ratio (target: mam >= 0.5x raw) and this process's CPU per message
(publisher, subscriber and wrapper threads; the broker's CPU is not counted). Rounds alternate
raw and mam; the medians are reported. The workspaces live under the OS temp dir (`--state-dir`
moves them, e.g. to /dev/shm). Exits non-zero only on an error.
"""

from __future__ import annotations

import argparse
import json
import shutil
import socket
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

sys.path.append(str(Path(__file__).resolve().parents[1]))  # for `bench._support`; mam itself comes from the venv

from bench import _support as support  # noqa: E402

TARGET = 0.5


@dataclass
class Row:
    kind: str  # raw | mam
    broker: str
    seconds: float
    cpu_s: float
    messages: int

    @property
    def rate(self) -> float:
        return self.messages / self.seconds

    @property
    def cpu_us_per_msg(self) -> float:
        return self.cpu_s / self.messages * 1e6


class Flow:
    """The pipeline window: the publisher waits while `window` messages are sent but not yet taken."""

    def __init__(self, window: int) -> None:
        self.window = window
        self.sent = 0
        self.taken = 0
        self.acked = 0
        self.cond = threading.Condition()

    def before_send(self) -> None:
        with self.cond:
            while self.sent - self.taken >= self.window:
                self.cond.wait(1.0)
            self.sent += 1

    def took(self, count: int = 1) -> None:
        with self.cond:
            self.taken += count
            self.cond.notify_all()

    def ack(self) -> None:
        with self.cond:
            self.acked += 1
            self.cond.notify_all()

    def wait_done(self, total: int, timeout: float) -> bool:
        with self.cond:
            return self.cond.wait_for(lambda: self.taken >= total and self.acked >= total, timeout)


def _paho(client_id: str, window: int) -> Any:
    """A paho client with the transport settings mam's MqttClient uses."""
    import paho.mqtt.client as paho

    client = paho.Client(
        paho.CallbackAPIVersion.VERSION2, client_id=client_id, protocol=paho.MQTTv311, clean_session=True
    )
    client.max_inflight_messages_set(window)
    client.max_queued_messages_set(0)
    return client


def _connect(client: Any, broker: support.Broker) -> None:
    ready = threading.Event()

    def on_connect(c, _u, _f, reason_code, _p):
        if not reason_code.is_failure:
            c.socket().setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            ready.set()

    client.on_connect = on_connect
    client.connect(broker.host, broker.port, keepalive=30)
    client.loop_start()
    if not ready.wait(10):
        raise RuntimeError(f"no CONNACK from {broker.kind} on {broker.port}")


def _probe(publisher: Any, topic: str, seen: threading.Event, flow: Flow) -> None:
    """Publish on `topic` until the subscriber sees it (its earlier SUBSCRIBE is then active too),
    then wait for the probes' acks and reset the ack count for the timed part."""
    deadline = time.monotonic() + 10
    sent = 0
    while not seen.wait(0.05):
        if time.monotonic() > deadline:
            raise RuntimeError("the subscriber never saw the probe message")
        publisher.publish(topic, b"probe", qos=1)
        sent += 1
    with flow.cond:
        if not flow.cond.wait_for(lambda: flow.acked >= sent, 10):
            raise RuntimeError("the probe messages were not acknowledged")
        flow.acked = 0


def _publish_all(
    publisher: Any, flow: Flow, n: int, message: Callable[[int], tuple[str, bytes]], errors: list[BaseException]
) -> None:
    try:
        for i in range(n):
            flow.before_send()
            topic, payload = message(i)
            info = publisher.publish(topic, payload, qos=1)
            if info.rc != 0:
                raise RuntimeError(f"publish failed with rc={info.rc}")
    except BaseException as e:  # reported by the main thread
        errors.append(e)
        flow.took(n)


def _timed(
    publisher: Any, flow: Flow, n: int, message: Callable[[int], tuple[str, bytes]], wait: Callable[[], None]
) -> tuple[float, float]:
    errors: list[BaseException] = []
    cpu0, t0 = time.process_time(), time.perf_counter()
    thread = threading.Thread(target=_publish_all, args=(publisher, flow, n, message, errors), daemon=True)
    thread.start()
    wait()
    seconds, cpu = time.perf_counter() - t0, time.process_time() - cpu0
    thread.join(10)
    if errors:
        raise RuntimeError(f"publisher failed: {errors[0]}")
    return seconds, cpu


# -- raw paho -----------------------------------------------------------------------------------
def run_raw(broker: support.Broker, n: int, window: int, size: int, tag: str) -> Row:
    topic, probe_topic = f"bench/{tag}/raw", f"bench/{tag}/probe"
    flow = Flow(window)
    probed = threading.Event()
    sub, pub = _paho(f"bench-{tag}-raw-sub", window), _paho(f"bench-{tag}-raw-pub", window)

    def on_message(_c, _u, msg):
        if msg.topic == probe_topic:
            probed.set()
        else:
            flow.took()

    sub.on_message = on_message
    pub.on_publish = lambda *_a: flow.ack()
    try:
        _connect(sub, broker)
        sub.subscribe(topic, qos=1)
        sub.subscribe(probe_topic, qos=1)
        _connect(pub, broker)
        _probe(pub, probe_topic, probed, flow)
        payload = b"x" * size
        deadline = 120.0

        def wait() -> None:
            if not flow.wait_done(n, deadline):
                raise RuntimeError(f"raw: only {flow.taken}/{n} received, {flow.acked}/{n} acked after {deadline:.0f}s")

        seconds, cpu = _timed(pub, flow, n, lambda _i: (topic, payload), wait)
    finally:
        for c in (pub, sub):
            c.disconnect()
            c.loop_stop()
    return Row("raw", broker.kind, seconds, cpu, n)


# -- mam ----------------------------------------------------------------------------------------
def event_body(size: int) -> dict[str, str]:
    """A progress body whose signed envelope is about `size` bytes."""
    base = _envelope(1, {"message": ""}, "0" * 64).encode()
    return {"message": "m" * max(0, size - len(base))}


def _envelope(seq: int, body: dict[str, str], token: str) -> Any:
    from mam.bus.envelope import Envelope
    from mam.jobs.record import now_ms

    return Envelope(
        kind="event", job="job-0123456789abcdef", seq=seq, type="progress", sender="agent", ts=now_ms(), body=body
    ).signed(token)


def run_mam(broker: support.Broker, n: int, window: int, size: int, tag: str, root: Path, remote: bool = False) -> Row:
    from mam.broker.endpoint import BrokerEndpoint
    from mam.bus.envelope import Envelope
    from mam.bus.mqtt import MqttClient
    from mam.bus.topics import Topics
    from mam.jobs.intake import Intake
    from mam.jobs.ledger import Ledger, new_job_id, new_owner
    from mam.jobs.model import Job, JobState, Tick
    from mam.jobs.record import now_ms, read_audit
    from mam.store.registry import Registry
    from mam.workspace import Workspace

    ws = Workspace((root / f"ws-{tag}").resolve())
    ws.root.mkdir(parents=True, exist_ok=True)
    registry = Registry(ws)
    prefix = f"bench/{tag}"
    job = Job(
        id=new_job_id(),
        session="bench",
        nonce="0" * 16,
        created_ms=now_ms(),
        start_deadline_ms=600_000,
        heartbeat_ms=600_000,
        heartbeat_k=4,
        budget_ms=3_600_000,
        state=JobState.RUNNING,
        claimed_ms=now_ms(),
        delivered_ms=now_ms(),
        started_ms=now_ms(),
    )
    ledger = Ledger.register(
        ws, registry, job, owner=new_owner(), meta={"target": "bench", "kind": "job", "topic_prefix": prefix}
    )
    # A local job's wrapper also polls the disk path (empty here: the publisher writes no store); a
    # remote job's wrapper stores each event it takes over MQTT instead (`--remote`).
    intake = Intake(ledger, registry, local=not remote)
    flow = Flow(window)
    probed = threading.Event()
    probe_topic = f"{prefix}/probe"
    body = event_body(size)
    token = ledger.token

    def message(i: int) -> tuple[str, bytes]:
        env = Envelope(
            kind="event", job=job.id, seq=i + 1, type="progress", sender="agent", ts=now_ms(), body=body
        ).signed(token)
        return Topics(prefix).events(env.job), env.encode()

    client = MqttClient(
        BrokerEndpoint(host=broker.host, port=broker.port), client_id=f"bench-{tag}-mam-sub", reconnect=False
    )
    pub = _paho(f"bench-{tag}-mam-pub", window)
    pub.on_publish = lambda *_a: flow.ack()
    try:
        client.connect(timeout=10)
        intake.attach(client, Topics(prefix).events(job.id))
        client.subscribe(probe_topic, lambda *_a: probed.set())
        _connect(pub, broker)
        _probe(pub, probe_topic, probed, flow)

        def follow() -> None:
            # The wrapper's follow loop (mam.jobs.attempt.JobAttempt._follow) without the pane.
            deadline = time.monotonic() + 120
            while ledger.job.last_seq < n:
                before = ledger.job.last_seq
                intake.pump(0.05)
                ledger.sync()
                ledger.apply(Tick(now_ms()))
                if ledger.job.last_seq > before:
                    flow.took(ledger.job.last_seq - before)
                if ledger.job.terminal or time.monotonic() > deadline:
                    raise RuntimeError(f"mam: job {ledger.job.state.value} after {ledger.job.last_seq}/{n} events")
            if not flow.wait_done(n, 30):
                raise RuntimeError(f"mam: only {flow.acked}/{n} publishes acknowledged")

        seconds, cpu = _timed(pub, flow, n, message, follow)
    finally:
        pub.disconnect()
        pub.loop_stop()
        client.close()
        registry.close()
    rejected = [line for line in read_audit(ws, job.id) if line.get("kind") in ("rejected", "seq_gap", "ignored")]
    if rejected:
        raise RuntimeError(f"mam: the gate or ledger refused {len(rejected)} events, first: {rejected[0]}")
    return Row("mam", broker.kind, seconds, cpu, n)


# -- driver -------------------------------------------------------------------------------------
def bench_broker(
    broker: support.Broker, args: argparse.Namespace, root: Path, say: Callable[[str], None]
) -> dict[str, Any]:
    rows: dict[str, list[Row]] = {"raw": [], "mam": []}
    for r in range(args.rounds):
        order = ("raw", "mam") if r % 2 == 0 else ("mam", "raw")
        for kind in order:
            tag = f"{broker.kind}-{r}-{kind}"
            if kind == "raw":
                row = run_raw(broker, args.messages, args.window, args.size, tag)
            else:
                row = run_mam(broker, args.messages, args.window, args.size, tag, root, args.remote)
            rows[kind].append(row)
            say(
                f"  {broker.kind:9} round {r + 1} {kind:3}: {row.rate:8.0f} msg/s  ({row.cpu_us_per_msg:5.0f} us "
                "CPU/msg in this process)"
            )
    raw = support.median([x.rate for x in rows["raw"]])
    mam = support.median([x.rate for x in rows["mam"]])
    paired = [m.rate / r.rate for r, m in zip(rows["raw"], rows["mam"])]  # each round's two rows ran back to back
    return {
        "broker": broker.kind,
        "raw_msgs_per_s": round(raw),
        "mam_msgs_per_s": round(mam),
        "ratio": round(mam / raw, 3),
        "paired_ratio_median": round(support.median(paired), 3),
        "raw_cpu_us_per_msg": round(support.median([x.cpu_us_per_msg for x in rows["raw"]]), 1),
        "mam_cpu_us_per_msg": round(support.median([x.cpu_us_per_msg for x in rows["mam"]]), 1),
        "rounds": {k: [round(x.rate) for x in v] for k, v in rows.items()},
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog="Target: mam >= 0.5x raw on Mosquitto (the amqtt row is informational).",
    )
    parser.add_argument("--messages", type=int, default=5000, help="messages per row and round (default 5000)")
    parser.add_argument(
        "--size", type=int, default=200, help="payload bytes; the mam envelope is padded to about this (default 200)"
    )
    parser.add_argument(
        "--window", type=int, default=100, help="most messages sent but not yet taken by the receiver (default 100)"
    )
    parser.add_argument(
        "--rounds",
        type=int,
        default=5,
        help="alternating raw/mam rounds on Mosquitto; medians are reported (default 5)",
    )
    parser.add_argument(
        "--amqtt-rounds", type=int, default=1, help="rounds on amqtt, the informational row (default 1; 0 skips amqtt)"
    )
    parser.add_argument(
        "--remote",
        action="store_true",
        help="follow the job as a remote job's wrapper does: also store each event taken over MQTT",
    )
    parser.add_argument(
        "--state-dir",
        type=Path,
        default=None,
        help="parent folder of the temporary workspaces (default: the system temp dir; try /dev/shm to take the disk "
        "out)",
    )
    parser.add_argument("--json", action="store_true", help="print the result as JSON")
    args = parser.parse_args(argv)
    if min(args.messages, args.size, args.window, args.rounds) <= 0 or args.amqtt_rounds < 0:
        parser.error("--messages, --size, --window and --rounds must be positive")

    say: Callable[[str], None] = (lambda _t: None) if args.json else (lambda t: print(t, flush=True))
    root = Path(tempfile.mkdtemp(prefix="mam-bench-event-path-", dir=args.state_dir))
    result: dict[str, Any] = {
        "messages": args.messages,
        "size": args.size,
        "window": args.window,
        "target": TARGET,
        "remote": args.remote,
        "envelope_bytes": len(_envelope(1, event_body(args.size), "0" * 64).encode()),
        "state_dir": str(root.parent),
        "machine": support.machine(),
        "brokers": [],
    }
    try:
        plan = [("mosquitto", support.start_mosquitto, args.rounds)]
        if args.amqtt_rounds:
            plan.append(("amqtt", support.start_amqtt, args.amqtt_rounds))
        for kind, start, rounds in plan:
            folder = root / kind
            folder.mkdir()
            broker = start(folder)
            try:
                say(
                    f"{kind} on 127.0.0.1:{broker.port}: {args.messages} messages of ~{args.size} B, window "
                    f"{args.window}, {rounds} round(s)"
                )
                result["brokers"].append(
                    bench_broker(broker, argparse.Namespace(**{**vars(args), "rounds": rounds}), root, say)
                )
            finally:
                broker.stop()
    except Exception as e:  # noqa: BLE001 - one line on stderr, exit 1
        print(f"event_path: error: {e}", file=sys.stderr)
        return 1
    finally:
        shutil.rmtree(root, ignore_errors=True)

    if args.json:
        print(json.dumps(result, indent=2))
        return 0
    print()
    print(
        f"{'broker':10} {'raw msg/s':>10} {'mam msg/s':>10} {'mam/raw':>8} {'paired':>7} {'raw us CPU/msg':>15} "
        f"{'mam us CPU/msg':>15}"
    )
    for b in result["brokers"]:
        print(
            f"{b['broker']:10} {b['raw_msgs_per_s']:>10} {b['mam_msgs_per_s']:>10} {b['ratio']:>7.2f}x "
            f"{b['paired_ratio_median']:>6.2f}x "
            f"{b['raw_cpu_us_per_msg']:>15} {b['mam_cpu_us_per_msg']:>15}"
        )
    print("(mam/raw: ratio of the medians; paired: median of each round's own mam/raw)")
    mosq = result["brokers"][0]
    verdict = "met" if mosq["ratio"] >= TARGET else "MISSED"
    print(
        f"target: mam >= {TARGET}x raw on Mosquitto -> {verdict} ({mosq['ratio']:.2f}x); envelope "
        f"{result['envelope_bytes']} B; "
        f"wrapper of a {'remote' if args.remote else 'local'} job"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
