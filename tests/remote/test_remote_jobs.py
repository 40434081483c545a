"""Remote jobs: dispatch to a runner on another 'host' (its own workspace, HOME, tmux server and
process tree), sharing only a broker."""

from __future__ import annotations

import json

from mam.bus.topics import Topics
from mam.jobs.record import now_ms
from mam.remote.dispatch import Dispatch
from tests.helpers.jobs import capture

SHORT = ["--start-deadline", "6", "--heartbeat", "0.5"]
INSECURE = ["--allow-insecure-broker"]


def start_runner(host, name="rb", *extra):
    return host.spawn("runner", "--name", name, *INSECURE, *extra)


def wait_online(origin, poll, name="rb"):
    # the runner's log says it started and the broker holds its presence
    poll(lambda: origin.mam("job", "list").returncode == 0, timeout=5)


def job_state(host, job_id):
    return json.loads(host.mam("job", "status", job_id, "--json").stdout or "{}").get("state")


def runner_started(host, poll, name="rb"):
    poll(lambda: any(e["kind"] == "started" for e in host.runner_log(name)), timeout=20)


def test_a_remote_job_completes_and_the_origin_audit_holds_every_event(two_hosts, mosquitto_broker, poll):
    origin, remote = two_hosts(mosquitto_broker.env())
    created = json.loads(
        remote.mam("session", "create", "--agent", "demo", "--role", "dev", "--session", "d1", "--json").stdout
    )
    start_runner(remote)
    runner_started(remote, poll)
    proc = origin.mam(
        "job",
        "delegate",
        "--target",
        "remote:rb/d1",
        "--brief",
        "demo-write: r.txt :: remote work",
        *SHORT,
        *INSECURE,
        "--json",
    )
    assert proc.returncode == 0, proc.stderr
    record = json.loads(proc.stdout)
    assert record["state"] == "completed"
    assert (remote.root / "r.txt").read_text() == "remote work\n"
    assert not (origin.root / "r.txt").exists()
    log = json.loads(origin.mam("job", "log", record["id"], "--json").stdout)
    events = [line["input"] for line in log if line["kind"] == "input" and line["input"]["input"] == "event"]
    types = [e["type"] for e in events]
    assert types[0] == "delivered" and "started" in types and types[-1] == "completed"
    seqs = [e["seq"] for e in events]
    assert seqs == sorted(seqs)
    # every event the runner host recorded for the job reached the origin's audit log
    remote_events = json.loads(remote.mam("job", "log", record["id"], "--json").stdout)
    remote_seqs = {
        line["input"]["seq"] for line in remote_events if line["kind"] == "input" and line["input"]["input"] == "event"
    }
    assert {s for s in remote_seqs if s <= max(seqs)} <= set(seqs)
    assert capture(remote.tmux.name, created["pane_id"]).count(record["nonce"]) == 1


def test_hosts_with_default_topic_prefixes_still_meet(two_hosts, mosquitto_broker, poll):
    """No MAM_TOPIC_PREFIX anywhere: runners meet origins under `mam/runners/`, and the dispatch
    tells the runner the origin's job prefix (which differs from its own workspace's)."""
    import uuid

    from mam.bus.topics import prefix_for
    from mam.settings import load_settings
    from mam.workspace import Workspace

    origin, remote = two_hosts(mosquitto_broker.env(), prefix="")
    origin_prefix, remote_prefix = (prefix_for(load_settings(environ={}), Workspace(h.root)) for h in (origin, remote))
    assert origin_prefix != remote_prefix
    runner = f"rb-{uuid.uuid4().hex[:6]}"  # the runners' namespace is shared by every test on this broker
    remote.mam("session", "create", "--agent", "demo", "--role", "dev", "--session", "d1", "--json", env={})
    start_runner(remote, runner)
    runner_started(remote, poll, runner)
    proc = origin.mam(
        "job",
        "delegate",
        "--target",
        f"remote:{runner}/d1",
        "--brief",
        "demo-write: p.txt :: met",
        *SHORT,
        *INSECURE,
        "--json",
    )
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["state"] == "completed"
    assert (remote.root / "p.txt").read_text() == "met\n"
    remote_record = json.loads((remote.root / ".mam" / "jobs" / f"{json.loads(proc.stdout)['id']}.json").read_text())
    assert remote_record["topic_prefix"] == origin_prefix


def test_a_second_runner_with_a_live_runners_name_is_refused_and_speaks_not_for_it(two_hosts, mosquitto_broker, poll):
    import uuid

    origin, remote = two_hosts(mosquitto_broker.env(), prefix="")
    runner = f"rb-{uuid.uuid4().hex[:6]}"
    remote.mam("session", "create", "--agent", "demo", "--role", "dev", "--session", "d1", "--json")
    start_runner(remote, runner)
    runner_started(remote, poll, runner)
    second = origin.mam("runner", "--name", runner, *INSECURE, "--once", timeout=60)
    assert second.returncode == 4, second.stderr
    assert f"a runner named {runner!r} is already online on this broker" in second.stderr
    assert str(remote.root) in second.stderr  # it names where the live one serves
    # The refused one never said 'offline' for the live one: a job still reaches it.
    proc = origin.mam(
        "job",
        "delegate",
        "--target",
        f"remote:{runner}/d1",
        "--brief",
        "demo-write: u.txt :: one",
        *SHORT,
        *INSECURE,
        "--json",
    )
    assert proc.returncode == 0, proc.stdout[-1500:] + str(remote.runner_log(runner))[-3000:]
    assert (remote.root / "u.txt").read_text() == "one\n"


def test_dispatch_attacks_are_rejected_and_logged_and_the_brief_arrives_once(two_hosts, mosquitto_broker, poll):
    import paho.mqtt.client as paho

    origin, remote = two_hosts(mosquitto_broker.env())
    created = json.loads(
        remote.mam("session", "create", "--agent", "demo", "--role", "dev", "--session", "d1", "--json").stdout
    )
    start_runner(remote)
    runner_started(remote, poll)
    proc = origin.mam(
        "job",
        "delegate",
        "--target",
        "remote:rb/d1",
        "--brief",
        "demo-write: once.txt :: x",
        *SHORT,
        *INSECURE,
        "--json",
    )
    assert proc.returncode == 0, proc.stderr
    record = json.loads(proc.stdout)
    topics = Topics(origin.env["MAM_TOPIC_PREFIX"])

    def dispatch(job_id: str, *, ts: int, secret: str, runner: str = "rb") -> bytes:
        return Dispatch(
            job_id=job_id,
            runner=runner,
            session="d1",
            text=f"attack {job_id}",
            key_nonce="0" * 32,
            nonce="n",
            ts=ts,
            start_deadline_ms=1000,
            heartbeat_ms=500,
            heartbeat_k=4,
            budget_ms=5000,
            origin="x",
        ).encode(secret)

    from tests.remote.conftest import SECRET

    attacks = {
        "duplicate": (
            record["id"],
            dispatch(record["id"], ts=now_ms(), secret=SECRET),
        ),  # a second delivery of a taken job
        "stale": ("job-stale", dispatch("job-stale", ts=now_ms() - 3_600_000, secret=SECRET)),
        "bad_signature": ("job-forged", dispatch("job-forged", ts=now_ms(), secret="wrong")),
        "wrong_runner": ("job-other", dispatch("job-other", ts=now_ms(), secret=SECRET, runner="someone-else")),
    }
    c = paho.Client(paho.CallbackAPIVersion.VERSION2, protocol=paho.MQTTv311)
    c.connect(mosquitto_broker.host, mosquitto_broker.port)
    c.loop_start()
    try:
        for job_id, payload in attacks.values():
            c.publish(topics.dispatch("rb", job_id), payload, qos=1, retain=True).wait_for_publish(5)
        poll(
            lambda: {e.get("reason") for e in remote.runner_log("rb") if e["kind"] == "rejected"} >= set(attacks),
            timeout=20,
            message=lambda: str(remote.runner_log("rb")),
        )
    finally:
        c.loop_stop()
        c.disconnect()
    pane = capture(remote.tmux.name, created["pane_id"])
    assert pane.count(record["nonce"]) == 1
    assert "attack" not in pane
    taken = [e for e in remote.runner_log("rb") if e["kind"] == "taken"]
    assert [e["job"] for e in taken] == [record["id"]]


def test_a_runner_killed_mid_job_leaves_the_wrapper_to_its_deadlines(two_hosts, mosquitto_broker, poll):
    import time

    origin, remote = two_hosts(mosquitto_broker.env())
    remote.mam(
        "session",
        "create",
        "--agent",
        "demo",
        "--role",
        "dev",
        "--session",
        "d1",
        env={"MAM_DEMO_BEHAVIOUR": "slow", "MAM_DEMO_SLEEP_S": "60"},
    )
    runner = start_runner(remote)
    runner_started(remote, poll)
    job = origin.spawn(
        "job",
        "delegate",
        "--target",
        "remote:rb/d1",
        "--brief",
        "long work",
        "--job-id",
        "job-orphaned",
        *SHORT,
        *INSECURE,
        "--json",
    )
    poll(
        lambda: (
            json.loads(origin.mam("job", "status", "job-orphaned", "--json").stdout or "{}").get("state") == "running"
        ),
        timeout=30,
    )
    runner.kill()
    killed = time.monotonic()
    out, err = job.communicate(timeout=60)
    took = time.monotonic() - killed
    assert job.returncode == 2, err
    assert json.loads(out)["reason"] == "deadline_timeout"
    assert took < 0.5 * 4 + 5  # K x N plus scheduling slack; the wrapper never hangs


def test_remote_dispatch_is_refused_on_an_insecure_broker(two_hosts, mosquitto_broker):
    origin, _remote = two_hosts(mosquitto_broker.env())
    proc = origin.mam("job", "delegate", "--target", "remote:rb/d1", "--brief", "x")
    assert proc.returncode == 2
    assert "--allow-insecure-broker" in proc.stderr
    runner = origin.mam("runner", "--name", "rb", "--once")
    assert runner.returncode == 2 and "TLS" in runner.stderr


def test_an_offline_runner_is_target_not_found(two_hosts, mosquitto_broker):
    origin, _remote = two_hosts(mosquitto_broker.env())
    proc = origin.mam("job", "delegate", "--target", "remote:nobody/d1", "--brief", "x", *SHORT, *INSECURE, "--json")
    assert proc.returncode == 5
    assert json.loads(proc.stdout)["reason"] == "target_not_found"


def test_an_unknown_remote_session_is_rejected_by_the_runner(two_hosts, mosquitto_broker, poll):
    origin, remote = two_hosts(mosquitto_broker.env())
    remote.mam("session", "create", "--agent", "demo", "--role", "dev", "--session", "d1")
    start_runner(remote)
    runner_started(remote, poll)
    proc = origin.mam("job", "delegate", "--target", "remote:rb/ghost", "--brief", "x", *SHORT, *INSECURE, "--json")
    assert proc.returncode == 5
    assert json.loads(proc.stdout)["reason"] == "target_not_found"


def test_a_runner_whose_retained_presence_is_missing_is_still_found(two_hosts, mosquitto_broker, poll):
    """A clustered broker may answer a subscription without the retained presence (NATS with a node down):
    here the retained copy is cleared outright, and the runner's live re-announce still lets a job reach it."""
    import paho.mqtt.client as paho

    origin, remote = two_hosts(mosquitto_broker.env())
    remote.mam("session", "create", "--agent", "demo", "--role", "dev", "--session", "d1")
    start_runner(remote)
    runner_started(remote, poll)
    topics = Topics(origin.env["MAM_TOPIC_PREFIX"])
    c = paho.Client(paho.CallbackAPIVersion.VERSION2, protocol=paho.MQTTv311)
    c.connect(mosquitto_broker.host, mosquitto_broker.port)
    c.loop_start()
    try:
        c.publish(topics.presence("rb"), b"", qos=1, retain=True).wait_for_publish(5)  # no retained presence left
    finally:
        c.loop_stop()
        c.disconnect()
    proc = origin.mam(
        "job", "delegate", "--target", "remote:rb/d1", "--brief", "demo-write: f.txt :: found", *SHORT, *INSECURE,
        "--json",
    )  # fmt: skip
    assert proc.returncode == 0, proc.stdout[-1500:] + proc.stderr
    assert (remote.root / "f.txt").read_text() == "found\n"


def test_a_dispatch_to_a_runner_that_is_offline_waits_for_it_and_is_typed_once_it_is_back(
    two_hosts, mosquitto_broker, poll
):
    """A runner that said it is offline (stopped: its goodbye) is waited for within --dispatch-wait: started
    again meanwhile, it takes the dispatch once. With a short --dispatch-wait the job ends target_not_found."""
    origin, remote = two_hosts(mosquitto_broker.env())
    created = json.loads(
        remote.mam("session", "create", "--agent", "demo", "--role", "dev", "--session", "d1", "--json").stdout
    )
    runner = start_runner(remote)
    runner_started(remote, poll)
    runner.terminate()
    runner.wait(20)
    poll(lambda: any(e["kind"] == "stopped" for e in remote.runner_log("rb")), timeout=20)
    short = origin.mam(
        "job", "delegate", "--target", "remote:rb/d1", "--brief", "x", "--dispatch-wait", "1", *SHORT, *INSECURE,
        "--json",
    )  # fmt: skip
    assert short.returncode == 5 and json.loads(short.stdout)["reason"] == "target_not_found", short.stderr
    assert "offline" in json.loads(short.stdout)["detail"]
    job = origin.spawn(
        "job", "delegate", "--target", "remote:rb/d1", "--brief", "demo-write: w.txt :: waited", "--job-id",
        "job-waited", "--dispatch-wait", "60", *SHORT, *INSECURE, "--json",
    )  # fmt: skip
    poll(lambda: job_state(origin, "job-waited") == "pending", timeout=20)
    start_runner(remote)
    out, err = job.communicate(timeout=90)
    assert job.returncode == 0, err + str(remote.runner_log("rb"))[-1500:]
    record = json.loads(out)
    assert record["state"] == "completed" and (remote.root / "w.txt").read_text() == "waited\n"
    assert capture(remote.tmux.name, created["pane_id"]).count(record["nonce"]) == 1


def test_a_dispatch_its_runner_missed_is_sent_again_until_taken_and_typed_once(two_hosts, mosquitto_broker, poll):
    """The runner cannot hear when its dispatch goes out (frozen, then killed: its presence still said online), and
    when it is back its retained read comes back without the dispatch (a clustered broker can answer so; here the
    retained copy is cleared outright). The origin sends the dispatch again until the runner's `delivered`: the job
    completes, the brief typed once (at 500 sessions, 9 jobs dispatched to a host while it was cut off ended
    agent_blocked, never typed, when the dispatch went out once)."""
    import signal

    import paho.mqtt.client as paho

    origin, remote = two_hosts(mosquitto_broker.env())
    created = json.loads(
        remote.mam("session", "create", "--agent", "demo", "--role", "dev", "--session", "d1", "--json").stdout
    )
    runner = start_runner(remote)
    runner_started(remote, poll)

    def audit() -> list[dict]:
        return json.loads(origin.mam("job", "log", "job-missed", "--json").stdout or "[]")

    runner.send_signal(signal.SIGSTOP)  # its connection stays open, so its presence still says online
    try:
        job = origin.spawn(
            "job", "delegate", "--target", "remote:rb/d1", "--brief", "demo-write: m.txt :: missed", "--job-id",
            "job-missed", "--start-deadline", "60", "--heartbeat", "0.5", *INSECURE, "--json",
        )  # fmt: skip
        poll(lambda: any(line["kind"] == "dispatched" for line in audit()), timeout=30)
    finally:
        runner.kill()  # what it had not read of the dispatch goes with it
        runner.wait(10)
    c = paho.Client(paho.CallbackAPIVersion.VERSION2, protocol=paho.MQTTv311)
    c.connect(mosquitto_broker.host, mosquitto_broker.port)
    c.loop_start()
    try:
        topic = Topics(origin.env["MAM_TOPIC_PREFIX"]).dispatch("rb", "job-missed")
        c.publish(topic, b"", qos=1, retain=True).wait_for_publish(5)  # no retained dispatch left to read
    finally:
        c.loop_stop()
        c.disconnect()
    start_runner(remote)
    out, err = job.communicate(timeout=120)
    assert job.returncode == 0, err + str(remote.runner_log("rb"))[-1500:]
    record = json.loads(out)
    assert record["state"] == "completed" and (remote.root / "m.txt").read_text() == "missed\n"
    assert capture(remote.tmux.name, created["pane_id"]).count(record["nonce"]) == 1
    assert "dispatch_resent" in [line["kind"] for line in audit()]
    taken = [e for e in remote.runner_log("rb") if e["kind"] == "taken" and e.get("job") == "job-missed"]
    assert len(taken) == 1, remote.runner_log("rb")
