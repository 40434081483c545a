"""Forged, tampered, replayed, out-of-order, wrong-job and oversized events, published with a raw
MQTT client while a real job runs: each is rejected and logged, and the job still completes."""

from __future__ import annotations

import json
import threading

import paho.mqtt.client as paho
import pytest

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


@pytest.mark.real_brokers  # the job path on amqtt and Mosquitto, not only the double
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


# OSC 52 sets the clipboard, OSC 0 the window title, CSI 2J clears the screen; 0x9b is the 8-bit CSI.
HOSTILE = "done\x1b]52;c;cHduZWQ=\x07 \x1b]0;owned\x1b\\\x1b[2J\x9b31m\r\x08\x7f ok"
SEEN = "done  ok"


def no_controls(text: str) -> bool:
    return not any(ord(c) < 32 and c not in "\n\t" or 0x7F <= ord(c) <= 0x9F for c in text)


def test_an_agents_result_report_and_progress_reach_no_terminal_with_control_sequences(wired, tmp_path, poll):
    """Issue 25, item 4: an OSC 52 in `mam event completed --message` reached `mam job delegate`'s stdout."""
    create_demo("w", behaviour="never_start")
    job = spawn_mam("job", "delegate", "--target", "w", "--brief", "real work", "--job-id", "job-osc")
    # The test is the agent here: it reports what a hostile agent would.
    status = poll(
        lambda: (
            (s := json.loads(mam("job", "status", "job-osc", "--json").stdout or "{}")).get("state") == "delivered"
            and s
        ),
        timeout=30,
    )
    mam("event", "started", "--job", "job-osc", "--nonce", status["nonce"], check=True)
    mam("event", "progress", "--job", "job-osc", "--message", "step\x1b]0;title\x07 one", check=True)
    snapshot = mam("top", "--snapshot", "--width", "200", check=True).stdout
    assert "step one" in snapshot and no_controls(snapshot), repr(snapshot)
    report = tmp_path / "report.md"
    report.write_text("# Report\n\tfine\x1b[8m hidden\x1b[0m\n\x1b]8;;http://evil/\x07link\x1b]8;;\x07\n")
    mam("event", "completed", "--job", "job-osc", "--message", HOSTILE, "--report", str(report), check=True)
    out, err = job.communicate(timeout=60)
    assert job.returncode == 0, err
    assert SEEN in out and "# Report\n\tfine hidden\nlink\n" in out, repr(out)
    assert no_controls(out) and no_controls(err), (repr(out), repr(err))
    for args in (("job", "status", "job-osc"), ("job", "log", "job-osc"), ("job", "list")):
        shown = mam(*args, check=True).stdout
        assert no_controls(shown), (args, repr(shown))
    as_json = mam("job", "status", "job-osc", "--json", check=True).stdout
    assert no_controls(as_json) and json.loads(as_json)["result"] == HOSTILE  # escaped, not lost
    logged = mam("job", "log", "job-osc", "--json", check=True).stdout
    assert no_controls(logged) and "\\u001b]52;c;cHduZWQ=\\u0007" in logged, logged


def test_rows_with_high_seqs_in_the_registry_and_a_wake_up_skip_no_real_event(wired, poll):
    """Issue 25, item 9: rows of high seq written into the registry, plus a wake-up, made the wrapper skip
    the job's later real events (its disk path trusted the rows' seq column)."""
    from mam.jobs.record import now_ms, read_audit
    from mam.store import jobs as jobs_table
    from mam.store.registry import Registry

    create_demo("w", behaviour="slow", env={"MAM_DEMO_SLEEP_S": "3"})
    job = spawn_mam("job", "delegate", "--target", "w", "--brief", "work", "--job-id", "job-rows", *SHORT, "--json")
    poll(lambda: wired.job_record("job-rows").exists() and record(wired, "job-rows")["state"] == "running", timeout=30)
    token = json.loads(wired.job_record("job-rows").read_text())["token"]
    forged = {  # seq column -> the raw text stored under it
        900_000: "not an envelope",
        900_001: Envelope(
            kind="event",
            job="job-rows",
            seq=900_001,
            type="progress",
            sender="agent",
            ts=now_ms(),
            body={"message": "x"},
        )
        .signed("not-the-token")
        .encode()
        .decode(),  # fmt: skip
        # validly signed, but stored under a seq it does not carry
        900_002: Envelope(
            kind="event", job="job-rows", seq=2, type="progress", sender="agent", ts=now_ms(), body={"message": "x"}
        )
        .signed(token)
        .encode()
        .decode(),  # fmt: skip
    }
    registry = Registry.open_existing(wired)
    assert registry is not None
    try:
        with registry.write() as conn:
            for seq, raw in forged.items():
                jobs_table.add_event(
                    conn, job_id="job-rows", seq=seq, type="progress", sender="agent", ts=now_ms(), raw=raw
                )
    finally:
        registry.close()
    from mam.util import pokes

    assert pokes.poke(wired, [pokes.events_key("job-rows")]) >= 1  # the wrapper heard the wake-up
    out, err = job.communicate(timeout=60)
    result = json.loads(out)
    assert (job.returncode, result["state"]) == (0, "completed"), (result, err)
    assert result["last_seq"] < 900_000, result
    rejected = [a for a in read_audit(wired, "job-rows") if a["kind"] == "rejected" and a.get("path") == "disk"]
    assert len(rejected) == 3, rejected
