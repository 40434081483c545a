"""Forged, tampered, replayed, out-of-order, wrong-job and oversized events, published with a raw
MQTT client while a real job runs: each is rejected and logged, and the job still completes."""

from __future__ import annotations

import json
import threading

import paho.mqtt.client as paho

from mam.bus.envelope import Envelope
from mam.bus.topics import Topics
from tests.helpers.jobs import create_demo, record
from tests.helpers.mamcli import mam, spawn_mam

SHORT = ["--start-deadline", "5", "--heartbeat", "0.5"]


def raw_client(broker):
    c = paho.Client(paho.CallbackAPIVersion.VERSION2, protocol=paho.MQTTv311)
    c.connect(broker.host, broker.port)
    c.loop_start()
    return c


def test_attacks_are_rejected_logged_and_change_nothing(wired, broker, poll):
    create_demo("w", behaviour="slow", env={"MAM_DEMO_SLEEP_S": "3"})
    create_demo("other", behaviour="slow", env={"MAM_DEMO_SLEEP_S": "3"})
    job = spawn_mam(
        "job", "delegate", "--target", "w", "--brief", "real work", "--job-id", "job-victim", *SHORT, "--json"
    )
    other = spawn_mam(
        "job", "delegate", "--target", "other", "--brief", "other work", "--job-id", "job-other", *SHORT, "--json"
    )
    captured: list[bytes] = []
    got = threading.Event()
    client = raw_client(broker)
    try:

        def state(job_id: str) -> str:
            proc = mam("job", "status", job_id, "--json")
            return json.loads(proc.stdout)["state"] if proc.returncode == 0 else ""

        poll(lambda: state("job-victim") == "running" and state("job-other") == "running", timeout=30)
        prefix = record(wired, "job-victim")["topic_prefix"]
        topics = Topics(prefix)
        client.on_message = lambda c, u, m: (captured.append(m.payload), got.set())
        client.subscribe(topics.events("job-victim"), qos=1)
        got.wait(10)  # a real event (progress or heartbeat) to replay
        assert captured, "no real event seen to replay"
        real = Envelope.decode(captured[0])
        token = record(wired, "job-victim")["token"]
        other_token = record(wired, "job-other")["token"]

        attacks = {
            "forged": Envelope("event", "job-victim", 9000, "completed", "agent", 1, {"message": "forged"})
            .signed("not-the-key")
            .encode(),
            "tampered": Envelope.from_obj({**json.loads(captured[0]), "body": {"message": "tampered"}}).encode(),
            "replayed": captured[0],
            "out_of_order": Envelope(
                "event", "job-victim", max(1, real.seq - 1), "progress", "agent", 1, {"message": "late"}
            )
            .signed(token)
            .encode(),
            "wrong_job": Envelope("event", "job-other", 9001, "completed", "agent", 1, {"message": "wrong job"})
            .signed(other_token)
            .encode(),
            "wrong_sender": Envelope("event", "job-victim", 9002, "completed", "heartbeater", 1, {})
            .signed(token)
            .encode(),
            "oversized": b"{" + b" " * (70 * 1024) + b"}",
            "garbage": b"\xff\xfe not json",
        }
        for payload in attacks.values():
            client.publish(topics.events("job-victim"), payload, qos=1).wait_for_publish(5)

        out, err = job.communicate(timeout=60)
        assert job.returncode == 0, err
        final = json.loads(out)
        assert final["state"] == "completed" and final["result"] != "forged"
        log = json.loads(mam("job", "log", "job-victim", "--json", check=True).stdout)
        reasons = [line["reason"] for line in log if line["kind"] == "rejected"]
        for expected in ("bad_signature", "replay", "wrong_job", "sender_not_allowed", "oversize", "not_json"):
            assert expected in reasons, (expected, reasons)
        assert reasons.count("bad_signature") >= 2  # forged and tampered
        assert "out_of_order" in reasons or reasons.count("replay") >= 2
        assert token not in json.dumps(log)
        other.communicate(timeout=60)
        assert other.returncode == 0
    finally:
        client.loop_stop()
        client.disconnect()
        for p in (job, other):
            if p.poll() is None:
                p.kill()
