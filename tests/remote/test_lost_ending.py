"""An ending event the origin never heard is sent again by the runner until the origin's final state says the job
ended there (issue 24: mam subscribes at QoS 0, at most once; at 500 sessions one `completed` of 11,965 events never
reached its origin, and that job ended `deadline_timeout` although its runner's copy completed).

The origin's link to the broker is cut (a real TCP relay reset, tests/helpers/cut.py) while the runner's agent
reports `completed`: the broker acknowledges it to the runner and delivers it to no one. Without the re-send the
origin would end the job by its heartbeat deadline."""

from __future__ import annotations

import json

import pytest

from tests.helpers.cut import CutLink
from tests.helpers.jobs import capture
from tests.remote.test_fencing import NO_NODE, kinds, remote_session
from tests.remote.test_remote_jobs import INSECURE, job_state, runner_started, start_runner


@pytest.mark.slow  # about 12-25 s: started among the first, not last (tests/conftest.py)
def test_an_ending_event_the_origin_missed_is_sent_again_until_the_origin_confirms_it(
    two_hosts, mosquitto_broker, poll
):
    link = CutLink(mosquitto_broker.host, mosquitto_broker.port)
    try:
        origin, remote = two_hosts(link.env(), remote_env=mosquitto_broker.env())
        origin.env.update(NO_NODE)  # the origin's attempt holds its own connection: the one the test cuts
        created = remote_session(remote, MAM_DEMO_BEHAVIOUR="slow", MAM_DEMO_SLEEP_S="6")  # cut before it ends
        start_runner(remote)
        runner_started(remote, poll)
        proc = origin.spawn(
            "job", "delegate", "--target", "remote:rb/d1", "--brief", "demo-write: r.txt :: resent", "--job-id",
            "job-resent", "--heartbeat", "10", "--timeout", "120", *INSECURE, "--json",
        )  # fmt: skip
        poll(lambda: job_state(origin, "job-resent") == "running", timeout=30)
        link.cut()  # the origin hears nothing more: the runner's `completed` goes to no one
        try:
            poll(lambda: job_state(remote, "job-resent") == "completed", timeout=30)
            # Sent again while the origin is still cut off: that copy is lost too; the next one is not.
            poll(lambda: "ending_resent" in kinds(remote, "job-resent"), timeout=30)
            assert job_state(origin, "job-resent") == "running"  # nothing reached it
        finally:
            link.join()
        out, err = proc.communicate(timeout=60)
        assert proc.returncode == 0, err
        record = json.loads(out)
        assert (record["state"], record["reason"]) == ("completed", "completed"), record
        assert (remote.root / "r.txt").read_text() == "resent\n"
        # The origin's final state stops the re-sending: the runner says so once.
        poll(
            lambda: any(e["kind"] == "confirmed" and e["job"] == "job-resent" for e in remote.runner_log("rb")),
            timeout=30,
        )
        assert not any(e["kind"] == "unconfirmed" for e in remote.runner_log("rb"))
        assert capture(remote.tmux.name, created["pane_id"]).count(record["nonce"]) == 1
    finally:
        link.close()
