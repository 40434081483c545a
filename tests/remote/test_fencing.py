"""Fencing epochs with a real broker, an origin workspace and a runner workspace (issue 24, item 3).

A runner cut off (SIGSTOP: its connection stays up, what the broker sends it waits in its socket) while
its job moves on must not land a result, type into a pane or end the job; a runner coming back onto a
job that already ended types nothing (Gas Town #4698). A take-over re-dispatches at the raised epoch,
so the runner that holds the job goes on with it and the job still completes.
"""

from __future__ import annotations

import json
import signal
import subprocess

import pytest

from mam.bus.envelope import Envelope
from mam.bus.topics import Topics
from tests.helpers.jobs import capture
from tests.remote.test_remote_jobs import INSECURE, job_state, runner_started, start_runner

NO_NODE = {"MAM_NODE": "0"}  # the origin's wrapper runs in the process the test kills; an event beside a frozen node


def retained(broker, topic):
    """The retained message on `topic` (an Envelope), or None: read on a fresh subscription, until our probe is back."""
    import threading
    import uuid

    import paho.mqtt.client as paho

    got: list[bytes] = []
    probed = threading.Event()
    probe = f"{topic}-probe-{uuid.uuid4().hex[:8]}"
    c = paho.Client(paho.CallbackAPIVersion.VERSION2, protocol=paho.MQTTv311)
    c.on_message = lambda _c, _u, m: probed.set() if m.topic == probe else got.append(m.payload)
    c.connect(broker.host, broker.port)
    c.loop_start()
    try:
        c.subscribe([(topic, 1), (probe, 1)])
        c.publish(probe, b"p", qos=1).wait_for_publish(5)
        probed.wait(5)
    finally:
        c.loop_stop()
        c.disconnect()
    return (
        Envelope.decode(got[-1]) if got and got[-1] else None
    )  # the origin's wrapper runs in the process the test kills


def audit(host, job_id):
    return json.loads(host.mam("job", "log", job_id, "--json", env=NO_NODE).stdout or "[]")


def kinds(host, job_id):
    return [line["kind"] for line in audit(host, job_id)]


def remote_session(remote, **env):
    made = remote.mam(
        "session", "create", "--agent", "demo", "--role", "dev", "--session", "d1", "--json", env=env
    )  # fmt: skip
    assert made.returncode == 0, made.stderr
    return json.loads(made.stdout)


def running_then_killed(origin, poll, job_id, *extra):
    """Delegate `job_id` to remote:rb/d1, wait until it runs, then kill its wrapper (the job stays open)."""
    first = origin.spawn(
        "job", "delegate", "--target", "remote:rb/d1", "--brief", "demo-write: f.txt :: fenced", "--job-id", job_id,
        "--start-deadline", "20", "--heartbeat", "5", "--timeout", "300", *INSECURE, "--json", *extra, env=NO_NODE,
    )  # fmt: skip
    poll(lambda: job_state(origin, job_id) == "running", timeout=30)
    first.kill()
    first.wait(10)


def take_over(origin, job_id):
    return origin.spawn(
        "job", "delegate", "--target", "remote:rb/d1", "--job-id", job_id, *INSECURE, "--json", env=NO_NODE
    )  # fmt: skip


@pytest.mark.slow  # about 12-25 s: started among the first, not last (tests/conftest.py)
def test_a_late_result_from_a_fenced_runner_is_rejected_and_changes_nothing(two_hosts, mosquitto_broker, poll):
    origin, remote = two_hosts(mosquitto_broker.env())
    origin.env.update(NO_NODE)
    created = remote_session(remote, MAM_DEMO_BEHAVIOUR="slow", MAM_DEMO_SLEEP_S="600")
    runner = start_runner(remote)
    runner_started(remote, poll)
    running_then_killed(origin, poll, "job-fenced")
    nonce = json.loads(origin.mam("job", "status", "job-fenced", "--json").stdout)["nonce"]
    runner.send_signal(signal.SIGSTOP)  # cut off: it hears nothing of the take-over until it comes back
    try:
        second = take_over(origin, "job-fenced")
        poll(lambda: "redispatched" in kinds(origin, "job-fenced"), timeout=30)
        # The runner's side reports a result while it is cut off: stored on its host at the copy's old epoch.
        late = remote.mam("event", "completed", "--job", "job-fenced", "--message", "late result", env=NO_NODE)
        assert late.returncode == 0, late.stderr
    finally:
        runner.send_signal(signal.SIGCONT)
    poll(lambda: "stale_epoch" in kinds(origin, "job-fenced"), timeout=30)
    lines = audit(origin, "job-fenced")
    stale = [line for line in lines if line["kind"] == "stale_epoch" and line["type"] == "completed"]
    assert stale and stale[0]["epoch"] == 0 and stale[0]["job_epoch"] == 1, lines[-5:]
    assert not any(line["kind"] == "input" and line["input"].get("type") == "completed" for line in lines), (
        "the late result was applied"
    )
    assert job_state(origin, "job-fenced") == "running"  # unchanged
    # The stale sender is told to stop: a signed, retained revoke naming the job's epoch and the one it fences.
    revoke = poll(
        lambda: retained(mosquitto_broker, Topics(origin.env["MAM_TOPIC_PREFIX"]).state("job-fenced")), timeout=10
    )
    assert (revoke.type, revoke.body["epoch"], revoke.body["revoked"]) == ("revoke", 1, 0)
    token = json.loads((origin.root / ".mam" / "jobs" / "job-fenced.json").read_text())["token"]
    assert revoke.verify(token)
    # Nothing more was typed on the runner's side (the re-dispatch never types): the brief is in the pane once.
    assert capture(remote.tmux.name, created["pane_id"]).count(nonce) == 1
    assert origin.mam("job", "cancel", "job-fenced").returncode == 0
    out, err = second.communicate(timeout=60)
    assert json.loads(out)["state"] == "cancelled", err
    assert capture(remote.tmux.name, created["pane_id"]).count(nonce) == 1


def test_a_take_over_re_dispatches_and_the_runner_completes_the_job_at_the_new_epoch(two_hosts, mosquitto_broker, poll):
    origin, remote = two_hosts(mosquitto_broker.env())
    origin.env.update(NO_NODE)
    created = remote_session(remote, MAM_DEMO_BEHAVIOUR="slow", MAM_DEMO_SLEEP_S="8")
    start_runner(remote)
    runner_started(remote, poll)
    running_then_killed(origin, poll, "job-retaken")
    second = take_over(origin, "job-retaken")
    out, err = second.communicate(timeout=90)
    assert second.returncode == 0, err + str(remote.runner_log("rb"))[-2000:]
    record = json.loads(out)
    assert record["state"] == "completed" and (remote.root / "f.txt").read_text() == "fenced\n"
    assert [e["epoch"] for e in remote.runner_log("rb") if e["kind"] == "moved_on"] == [1]
    assert capture(remote.tmux.name, created["pane_id"]).count(record["nonce"]) == 1


def test_a_runner_coming_back_onto_a_job_that_already_ended_types_nothing(two_hosts, mosquitto_broker, poll):
    """Gas Town #4698: the runner is cut off while the dispatch reaches it; the origin's job ends (no
    `delivered` within the start deadline); the runner comes back, holding that dispatch, still fresh."""
    origin, remote = two_hosts(mosquitto_broker.env())
    origin.env.update(NO_NODE)
    created = remote_session(remote)
    runner = start_runner(remote)
    runner_started(remote, poll)
    runner.send_signal(signal.SIGSTOP)
    try:
        ended = origin.mam(
            "job", "delegate", "--target", "remote:rb/d1", "--brief", "demo-write: z.txt :: zombie", "--job-id",
            "job-zombie", "--start-deadline", "2", "--heartbeat", "1", *INSECURE, "--json",
        )  # fmt: skip
    finally:
        runner.send_signal(signal.SIGCONT)
    record = json.loads(ended.stdout)
    assert (record["state"], record["reason"]) == ("failed", "agent_blocked"), ended.stderr
    poll(lambda: any(e.get("job") == "job-zombie" for e in remote.runner_log("rb")), timeout=30)
    seen = [e for e in remote.runner_log("rb") if e.get("job") == "job-zombie"]
    assert [e["kind"] for e in seen] == ["fenced"], seen
    assert "ended at the origin" in seen[0]["detail"]
    copy = json.loads(remote.mam("job", "status", "job-zombie", "--json").stdout)
    assert (copy["state"], copy["reason"]) == ("failed", "origin_agent_blocked")
    assert record["nonce"] not in capture(remote.tmux.name, created["pane_id"])
    assert not (remote.root / "z.txt").exists()
    # The runner keeps serving: the next job is typed once and completes.
    done = origin.mam(
        "job", "delegate", "--target", "remote:rb/d1", "--brief", "demo-write: n.txt :: next", *INSECURE, "--json"
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert (remote.root / "n.txt").read_text() == "next\n"
    runner.terminate()
    try:
        runner.wait(20)
    except subprocess.TimeoutExpired:
        runner.kill()


@pytest.mark.slow  # about 12-25 s: started among the first, not last (tests/conftest.py)
def test_a_copy_moved_on_says_again_that_it_started_so_a_take_over_that_never_heard_it_completes(
    two_hosts, mosquitto_broker, poll
):
    """The origin's wrapper dies before it hears the runner's `delivered` and the agent's `started` (the runner was
    frozen when the dispatch went out); the take-over re-dispatches at epoch 1, and would refuse those two, recorded
    at epoch 0. The runner says them again at epoch 1, so the job completes (without that it ended agent_blocked)."""
    origin, remote = two_hosts(mosquitto_broker.env())
    origin.env.update(NO_NODE)
    created = remote_session(
        remote, MAM_DEMO_BEHAVIOUR="slow", MAM_DEMO_SLEEP_S="10"
    )  # the take-over comes well within it
    runner = start_runner(remote)
    runner_started(remote, poll)
    runner.send_signal(signal.SIGSTOP)  # the dispatch waits for it at the broker
    try:
        first = origin.spawn(
            "job", "delegate", "--target", "remote:rb/d1", "--brief", "demo-write: s.txt :: restated", "--job-id",
            "job-restated", "--start-deadline", "30", "--heartbeat", "5", "--timeout", "300", *INSECURE, "--json",
        )  # fmt: skip
        poll(lambda: "dispatched" in kinds(origin, "job-restated"), timeout=30)
        first.kill()  # no one at the origin hears the copy's first events
        first.wait(10)
    finally:
        runner.send_signal(signal.SIGCONT)
    poll(lambda: job_state(remote, "job-restated") == "running", timeout=30)
    assert job_state(origin, "job-restated") == "delivering"
    second = take_over(origin, "job-restated")
    out, err = second.communicate(timeout=90)
    assert second.returncode == 0, err + str(remote.runner_log("rb"))[-2000:]
    record = json.loads(out)
    assert record["state"] == "completed", record
    assert [line["epoch"] for line in audit(origin, "job-restated") if line["kind"] == "taken_over"] == [1]
    assert (remote.root / "s.txt").read_text() == "restated\n"
    assert [line["type"] for line in audit(remote, "job-restated") if line["kind"] == "restated"] == [
        "delivered",
        "started",
    ]
    assert capture(remote.tmux.name, created["pane_id"]).count(record["nonce"]) == 1
