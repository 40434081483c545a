"""Every exit code of `mam job delegate`, end to end: real tmux, the demo agent, both brokers."""

from __future__ import annotations

import json

import pytest

from tests.helpers.jobs import capture, create_demo, replayed_state
from tests.helpers.mamcli import mam

SHORT = ["--start-deadline", "3", "--heartbeat", "0.5"]


def delegate(*args: str, env: dict[str, str] | None = None):
    proc = mam("job", "delegate", "--json", *args, env=env, timeout=60)
    record = json.loads(proc.stdout) if proc.stdout.strip() else {}
    return proc.returncode, record, proc


def nonce_count(tmux_server, session: dict, record: dict) -> int:
    return capture(tmux_server.name, session["pane_id"]).count(record["nonce"])


@pytest.mark.real_brokers  # the job path on amqtt and Mosquitto, not only the double
def test_completed_exits_0_and_the_brief_is_in_the_pane_once(wired, tmux_server):
    s = create_demo("worker")
    code, record, proc = delegate("--target", "tmux:worker", "--brief", "demo-write: out.txt :: done it", *SHORT)
    assert code == 0, proc.stderr
    assert record["state"] == "completed" and record["exit_code"] == 0 and record["session"] == "worker"
    assert (wired.root / "out.txt").read_text() == "done it\n"
    assert "token" not in record
    assert nonce_count(tmux_server, s, record) == 1
    assert replayed_state(wired, record["id"]).state.value == "completed"
    status = json.loads(mam("job", "status", record["id"], "--json", check=True).stdout)
    assert status["state"] == "completed" and status["exit_code"] == 0


def test_plain_output_prints_the_result(wired):
    create_demo("w")
    proc = mam("job", "delegate", "--target", "w", "--brief", "demo-write: a.txt :: x", *SHORT)
    assert proc.returncode == 0
    assert "write a.txt" in proc.stdout


def test_agent_error_exits_1(wired):
    create_demo("w", behaviour="error")
    code, record, _ = delegate("--target", "w", "--brief", "do it", *SHORT)
    assert code == 1
    assert record["state"] == "failed" and record["reason"] == "agent_error"
    assert "told to fail" in record["detail"]


def test_a_brief_the_demo_agent_cannot_carry_out_ends_the_job_with_its_error_not_at_the_deadline(wired):
    """A directive the demo agent cannot read (`demo-sleep: 0.05 then`) after its `started`: it once only said so
    on its screen and the job ran to its timeout; it now reports `error`, as a real agent would."""
    create_demo("w")
    code, record, _ = delegate("--target", "w", "--brief", "demo-sleep: 0.05 then", "--timeout", "300", *SHORT)
    assert code == 1
    assert record["state"] == "failed" and record["reason"] == "agent_error", record
    assert "demo agent: ValueError" in record["detail"], record


def test_no_started_within_the_deadline_is_agent_blocked_exit_1(wired, tmux_server):
    s = create_demo("w", behaviour="never_start")
    code, record, _ = delegate("--target", "w", "--brief", "do it", "--start-deadline", "1.5", "--heartbeat", "0.5")
    assert code == 1
    assert record["reason"] == "agent_blocked"
    assert nonce_count(tmux_server, s, record) == 1
    assert replayed_state(wired, record["id"]).reason == "agent_blocked"


def test_agent_crash_after_start_is_deadline_timeout_exit_2(wired, tmux_server):
    s = create_demo("w", behaviour="crash_after_start")
    code, record, _ = delegate("--target", "w", "--brief", "do it", *SHORT)
    assert code == 2
    assert record["reason"] == "deadline_timeout"
    assert replayed_state(wired, record["id"]).reason == "deadline_timeout"
    status = json.loads(mam("session", "status", "--json", check=True).stdout)
    assert status[0]["drift"]  # the registry still says running; status reports the dead pane
    assert s["pane_id"] == status[0]["pane_id"]


def test_silence_after_start_is_deadline_timeout_exit_2(wired):
    create_demo("w", behaviour="silent_after_start")
    code, record, _ = delegate("--target", "w", "--brief", "do it", *SHORT)
    assert code == 2 and record["reason"] == "deadline_timeout"


def test_budget_spent_is_wall_clock_timeout_exit_2(wired):
    create_demo("w", behaviour="slow", env={"MAM_DEMO_SLEEP_S": "30"})
    code, record, _ = delegate("--target", "w", "--brief", "do it", "--timeout", "2", *SHORT)
    assert code == 2 and record["reason"] == "wall_clock_timeout"


def test_broker_unreachable_exits_3(workspace, monkeypatch):
    from tests.helpers.brokers import free_port

    monkeypatch.setenv("MQTT_BROKER", "127.0.0.1")
    monkeypatch.setenv("MQTT_PORT", str(free_port()))
    create_demo("w")
    code, record, _ = delegate("--target", "w", "--brief", "do it", *SHORT)
    assert code == 3
    assert record["reason"] == "broker_unavailable"


def test_unknown_target_exits_5_names_the_sessions_and_leaves_no_job(wired):
    code, record, proc = delegate("--target", "tmux:nobody", "--brief", "do it", *SHORT)
    assert code == 5 and record == {}
    assert "no session named 'nobody' in this workspace (it has none: create one with `mam session create`)" in (
        proc.stderr
    )
    create_demo("dev-1")
    code, record, proc = delegate("--target", "dev-2", "--brief", "do it", *SHORT)
    assert code == 5 and record == {}
    assert proc.stderr.strip() == (
        "mam: error: no session named 'dev-2' in this workspace (sessions: dev-1); did you mean dev-1?"
    )
    assert json.loads(mam("job", "list", "--json", check=True).stdout) == []
    assert not list(wired.jobs_dir.glob("*.json"))


def test_an_unknown_parent_job_is_a_usage_error_and_registers_nothing(wired):
    create_demo("w")
    proc = mam("job", "delegate", "--target", "w", "--brief", "do it", "--parent-job", "job-nosuch", *SHORT)
    assert proc.returncode == 2
    assert "--parent-job 'job-nosuch': no such job" in proc.stderr
    assert json.loads(mam("job", "list", "--json", check=True).stdout) == []


def test_busy_session_is_cancelled_exit_5_and_the_brief_never_delivered(wired, tmux_server, poll):
    from tests.helpers.mamcli import spawn_mam

    s = create_demo("w")
    go = wired.root / "go"  # the first job works until the second is refused (demo-await), whatever the load
    first = spawn_mam("job", "delegate", "--target", "w", "--brief", f"demo-await: {go}\nfirst job", *SHORT, "--json")
    try:
        poll(lambda: any(j["state"] == "running" for j in json.loads(mam("job", "list", "--json").stdout)), timeout=20)
        code, record, _ = delegate("--target", "w", "--brief", "second job", "--dispatch-wait", "0.5", *SHORT)
        assert code == 5
        assert record["reason"] == "session_busy"
        assert nonce_count(tmux_server, s, record) == 0
        go.touch()
        out, err = first.communicate(timeout=60)
        assert first.returncode == 0, err
    finally:
        if first.poll() is None:
            first.kill()


def test_a_brief_left_unsubmitted_gets_enter_again_not_a_second_paste(wired, tmux_server):
    s = create_demo("w", behaviour="unsubmitted")
    code, record, _ = delegate(
        "--target", "w", "--brief", "demo-write: u.txt :: ok", "--start-deadline", "6", "--heartbeat", "0.5"
    )
    assert code == 0
    assert nonce_count(tmux_server, s, record) == 1
    kinds = [line["kind"] for line in json.loads(mam("job", "log", record["id"], "--json", check=True).stdout)]
    assert kinds.count("injected") == 1 and kinds.count("nudge") >= 1


def test_a_dead_agent_is_never_typed_into(wired, tmux_server, poll):
    import os
    import signal

    s = create_demo("w")
    os.kill(s["pane_pid"], signal.SIGKILL)
    poll(lambda: "dead" in json.loads(mam("session", "status", "--json").stdout)[0]["drift"], timeout=10)
    code, record, _ = delegate("--target", "w", "--brief", "never typed", *SHORT)
    assert code == 5 and record["reason"] == "target_not_found"
    assert "never typed" not in capture(tmux_server.name, s["pane_id"])
    status = json.loads(mam("session", "status", "--json").stdout)
    assert status[0]["status"] == "terminated"


def test_another_attempt_takes_the_job_over(wired, tmux_server, poll):
    from tests.helpers.mamcli import spawn_mam

    s = create_demo("w")
    go = wired.root / "go"  # the job runs until the second attempt has taken it over, however slow the machine
    brief = f"demo-await: {go}"
    first = spawn_mam(
        "job", "delegate", "--target", "w", "--brief", brief, "--job-id", "job-takeover-1", *SHORT, "--json"
    )
    second = None
    try:
        poll(
            lambda: (
                mam("job", "status", "job-takeover-1", "--json").returncode == 0
                and json.loads(mam("job", "status", "job-takeover-1", "--json").stdout)["state"] == "running"
            ),
            timeout=20,
        )
        second = spawn_mam("job", "delegate", "--json", "--target", "w", "--job-id", "job-takeover-1", *SHORT)
        out, _ = first.communicate(timeout=60)
        assert first.returncode == 5
        assert json.loads(out)["taken_over"] is True
        go.touch()
        got, err = second.communicate(timeout=60)
        assert second.returncode == 0, err
        record = json.loads(got)
        assert record["state"] == "completed"
        assert nonce_count(tmux_server, s, record) == 1
    finally:
        for proc in (first, second):
            if proc is not None and proc.poll() is None:
                proc.kill()


@pytest.mark.parametrize("behaviour,expected", [("ok", 0), ("error", 44), ("never_start", 45)])
def test_onboarding_exit_codes(wired, behaviour, expected):
    proc = mam(
        "session",
        "create",
        "--agent",
        "demo",
        "--role",
        "dev",
        "--session",
        "o",
        "--onboard",
        "--onboard-timeout",
        "4",
        env={"MAM_DEMO_BEHAVIOUR": behaviour, "MAM_START_DEADLINE_S": "1.5", "MAM_HEARTBEAT_S": "0.5"},
    )
    assert proc.returncode == expected, proc.stderr
    status = json.loads(mam("session", "status", "--json").stdout)
    assert [r["name"] for r in status] == ["o"]  # the session is kept either way


def test_the_agent_side_commands_of_the_contract(wired, poll):
    """`mam event started --job ID [--heartbeat N]` (the contract's form, no --nonce), progress, completed."""
    from tests.helpers.mamcli import spawn_mam

    create_demo("w", behaviour="never_start")  # the demo ignores the brief: the test plays the agent
    job = spawn_mam(
        "job",
        "delegate",
        "--target",
        "w",
        "--brief",
        "by hand",
        "--job-id",
        "job-by-hand",
        "--start-deadline",
        "20",
        "--heartbeat",
        "1",
        "--json",
    )
    try:
        poll(
            lambda: (
                mam("job", "status", "job-by-hand", "--json").returncode == 0
                and json.loads(mam("job", "status", "job-by-hand", "--json").stdout)["state"] == "delivered"
            ),
            timeout=20,
        )
        assert mam("event", "started", "--job", "job-by-hand", "--heartbeat", "1").returncode == 0
        assert mam("event", "progress", "--job", "job-by-hand", "--message", "half way").returncode == 0
        assert mam("event", "completed", "--job", "job-by-hand", "--message", "done by hand").returncode == 0
        out, err = job.communicate(timeout=30)
        assert job.returncode == 0, err
        assert json.loads(out)["result"] == "done by hand"
        again = mam("event", "progress", "--job", "job-by-hand", "--message", "too late")
        assert again.returncode == 1 and "already ended" in again.stderr
        assert mam("event", "progress", "--job", "job-nobody", "--message", "x").returncode == 5
    finally:
        if job.poll() is None:
            job.kill()
