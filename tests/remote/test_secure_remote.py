"""A remote job between two hosts that share nothing but a Mosquitto with TLS, a password file and
a per-runner ACL; each host connects with its own user."""

from __future__ import annotations

import json

from tests.helpers.secure_broker import ORCHESTRATOR


def test_a_remote_job_over_tls_passwords_and_acls(two_hosts, secure_broker, poll):
    origin, remote = two_hosts(
        secure_broker.env(ORCHESTRATOR), secure_broker.env("runner-a"), prefix=secure_broker.prefix
    )
    assert origin.env["MQTT_USERNAME"] != remote.env["MQTT_USERNAME"]
    remote.mam("session", "create", "--agent", "demo", "--role", "dev", "--session", "d1")
    remote.spawn("runner", "--name", "runner-a")  # no --allow-insecure-broker: TLS and a password are in use
    poll(lambda: any(e["kind"] == "started" for e in remote.runner_log("runner-a")), timeout=20)
    proc = origin.mam(
        "job",
        "delegate",
        "--target",
        "remote:runner-a/d1",
        "--brief",
        "demo-write: tls.txt :: over tls",
        "--start-deadline",
        "10",
        "--heartbeat",
        "0.5",
        "--json",
    )
    assert proc.returncode == 0, proc.stderr
    record = json.loads(proc.stdout)
    assert (remote.root / "tls.txt").read_text() == "over tls\n"
    log = json.loads(origin.mam("job", "log", record["id"], "--json").stdout)
    origin_seqs = [
        line["input"]["seq"] for line in log if line["kind"] == "input" and line["input"]["input"] == "event"
    ]
    # Every event the runner's host recorded up to the end of the job reached the origin's audit log
    # (a heartbeat recorded just after `completed` may arrive after the job ended: it is ignored there).
    last = max(origin_seqs)
    remote_seqs = [seq for seq in _remote_event_seqs(remote, record["id"]) if seq <= last]
    assert remote_seqs and set(remote_seqs) <= set(origin_seqs), (remote_seqs, origin_seqs)
    # Nothing secret in what the origin keeps for people: the audit log and the printed record.
    assert secure_broker.passwords[ORCHESTRATOR] not in json.dumps(log) + proc.stdout + proc.stderr


def test_a_runner_cannot_take_another_runners_dispatch(two_hosts, secure_broker, poll):
    origin, remote = two_hosts(
        secure_broker.env(ORCHESTRATOR), secure_broker.env("runner-b"), prefix=secure_broker.prefix
    )
    remote.mam("session", "create", "--agent", "demo", "--role", "dev", "--session", "d1")
    # runner-b's credentials, pretending to be runner-a: the ACL keeps runner-a's topics away from it
    remote.spawn("runner", "--name", "runner-a")
    proc = origin.mam(
        "job",
        "delegate",
        "--target",
        "remote:runner-a/d1",
        "--brief",
        "x",
        "--start-deadline",
        "3",
        "--heartbeat",
        "0.5",
        "--dispatch-wait",
        "3",  # the module's broker may hold the real runner-a's retained "offline": it would be waited for
        "--json",
    )
    assert proc.returncode == 5  # runner-a never announced itself (online) where the orchestrator can see it
    assert json.loads(proc.stdout)["reason"] == "target_not_found"
    assert not [e for e in remote.runner_log("runner-a") if e["kind"] == "taken"]


def _remote_event_seqs(host, job_id: str) -> list[int]:
    reg = host_registry(host)
    try:
        return [e.seq for e in reg.events_after(job_id, 0)]
    finally:
        reg.close()


def host_registry(host):
    from mam.store.registry import Registry
    from mam.workspace import Workspace

    return Registry(Workspace(host.root))
