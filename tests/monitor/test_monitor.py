"""The monitor: drift repairs within its interval, orphaned jobs closed, broker outages survived."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys

import pytest

from mam.panes.tmux import socket_path
from tests.helpers.jobs import FAST, create_demo
from tests.helpers.mamcli import mam, spawn_mam


def status() -> list[dict]:
    return json.loads(mam("session", "status", "--json", check=True).stdout)


def monitor_log(ws) -> list[dict]:
    path = ws.state / "monitor.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


def stop(proc: subprocess.Popen) -> None:
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
        proc.wait(15)


def test_a_killed_pane_is_marked_terminated_within_the_interval(workspace, tmux_server, monkeypatch, poll):
    monkeypatch.setenv("MAM_POLL_S", "0.05")
    s = create_demo("victim")
    create_demo("bystander")
    mon = spawn_mam("monitor", "--interval", "0.3")
    try:
        subprocess.run(["tmux", "-L", tmux_server.name, "kill-pane", "-t", s["pane_id"]], check=True)
        poll(
            lambda: {r["name"]: r["status"] for r in status()} == {"victim": "terminated", "bystander": "running"},
            timeout=10,
        )
        # The row is marked in the monitor's pass, its log line written once the pass is done: looked for until then.
        repair = poll(lambda: next((e for e in monitor_log(workspace) if e["kind"] == "repair"), None), timeout=10)
        assert repair["session"] == "victim" and "pane gone" in repair["reason"]
    finally:
        stop(mon)


def test_an_unknown_agent_pane_is_registered_but_never_the_orchestrators(workspace, tmux_server, poll):
    create_demo("known")
    tmux = ["tmux", "-L", tmux_server.name]
    demo = [sys.executable, "-m", "mam.agents.demo_agent", "--session-id"]
    subprocess.run([*tmux, "new-window", "-d", "-n", "stray", "--", *demo, "stray-convo"], check=True)
    orc = subprocess.run(
        [*tmux, "new-window", "-d", "-P", "-F", "#{pane_id}", "-n", "orc", "--", *demo, "orc-convo"],
        check=True,
        capture_output=True,
        text=True,
    ).stdout.strip()
    shell = subprocess.run([*tmux, "new-window", "-d", "-n", "justashell", "--", "/bin/sh"], check=True)
    assert shell.returncode == 0
    mam("session", "onboard-orchestrator", "--backend", "tmux", "--server", tmux_server.name, "--pane", orc, check=True)
    out = json.loads(mam("monitor", "--once", "--json", check=True).stdout)
    registered = {e["session"] for e in out if e["what"] == "registered"}
    assert registered == {"stray"}
    rows = {r["name"]: r for r in status()}
    assert rows["stray"]["agent"] == "demo" and rows["stray"]["conversation_id"] == "stray-convo"
    assert "orc" not in rows and "justashell" not in rows
    again = json.loads(mam("monitor", "--once", "--json", check=True).stdout)
    assert again == []  # nothing left to repair


def test_only_one_monitor_per_workspace(workspace, poll):
    mon = spawn_mam("monitor", "--interval", "5")
    try:
        poll(lambda: (workspace.run_dir / "monitor.pid").exists(), timeout=10)
        second = mam("monitor", "--once")
        assert second.returncode == 4 and "already runs" in second.stderr
    finally:
        stop(mon)


def test_looking_starts_nothing(workspace, tmux_server):
    create_demo("s")
    tmux_server.kill()
    before = set(os.listdir("/proc"))
    out = json.loads(mam("monitor", "--once", "--json", check=True).stdout)
    assert [e["session"] for e in out] == ["s"]
    assert not socket_path(tmux_server.name).exists()
    assert not (workspace.state / "broker" / "broker.pid").exists()
    # Other tests run tmux servers and brokers at the same time: look only for this workspace's (a broker's command
    # line names its workspace's files). A tmux client run with -N (as the node's control client is) cannot start a
    # server: not counted.
    started = [
        p
        for p in set(os.listdir("/proc")) - before
        if p.isdigit()
        and (
            (tmux_server.name in _cmd(p) and "\0-N\0" not in _cmd(p))
            or ("mam.broker.serve" in _cmd(p) and str(workspace.root) in _cmd(p))
        )
    ]
    assert started == [], [_cmd(p) for p in started]


def test_a_new_workspace_has_nothing_to_repair(workspace):
    assert json.loads(mam("monitor", "--once", "--json", check=True).stdout) == []
    (workspace.state / "agent-sessions.yaml").unlink()  # a lost mirror of an empty registry: rewritten quietly
    assert json.loads(mam("monitor", "--once", "--json", check=True).stdout) == []
    create_demo("s")
    (workspace.state / "agent-sessions.yaml").unlink()
    out = json.loads(mam("monitor", "--once", "--json", check=True).stdout)
    assert [(e["what"], e["reason"]) for e in out] == [("mirror", "the sessions mirror was missing")]
    assert (workspace.state / "agent-sessions.yaml").exists()


def _cmd(pid: str) -> str:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            return f.read().decode(errors="replace")
    except OSError:
        return ""


@pytest.mark.real_brokers  # the job path on amqtt and Mosquitto, not only the double
def test_a_job_whose_wrapper_died_is_followed_to_its_end(wired, poll):
    create_demo("w")
    go = wired.root / "go"  # the job runs until its wrapper is dead, however slow the machine
    brief = f"demo-await: {go}"
    wrapper = spawn_mam(
        "job", "delegate", "--target", "w", "--brief", brief, "--job-id", "job-orphan", "--heartbeat", "0.5", "--json"
    )
    poll(
        lambda: json.loads(mam("job", "status", "job-orphan", "--json").stdout or "{}").get("state") == "running",
        timeout=30,
    )
    wrapper.kill()
    wrapper.wait(10)
    mon = spawn_mam("monitor", "--subscribe", "--interval", "0.2")
    go.touch()
    try:
        poll(
            lambda: json.loads(mam("job", "status", "job-orphan", "--json").stdout)["state"] == "completed", timeout=30
        )
    finally:
        stop(mon)


def test_an_orphaned_job_with_a_dead_agent_ends_by_its_deadline(wired, poll):
    s = create_demo("w", behaviour="slow", env={"MAM_DEMO_SLEEP_S": "60"})
    wrapper = spawn_mam(
        "job", "delegate", "--target", "w", "--brief", "work", "--job-id", "job-orphan2", "--heartbeat", "0.5", "--json"
    )
    poll(
        lambda: json.loads(mam("job", "status", "job-orphan2", "--json").stdout or "{}").get("state") == "running",
        timeout=30,
    )
    wrapper.kill()
    os.kill(s["pane_pid"], signal.SIGKILL)

    def one_pass_then_state() -> str:
        mam("monitor", "--once", check=True)  # each pass may end the orphan once its deadline has passed
        return json.loads(mam("job", "status", "job-orphan2", "--json").stdout)["state"]

    poll(lambda: one_pass_then_state() == "timed_out", timeout=20)
    assert json.loads(mam("job", "status", "job-orphan2", "--json").stdout)["reason"] == "deadline_timeout"


def test_the_monitor_polls_through_a_broker_outage_and_resubscribes(
    workspace, tmux_server, own_broker, monkeypatch, poll
):
    broker = own_broker("mosquitto")
    for key, value in {**broker.env(), **FAST}.items():
        monkeypatch.setenv(key, value)
    s = create_demo("a")
    create_demo("b")
    mon = spawn_mam("monitor", "--subscribe", "--interval", "0.3")
    try:
        poll(lambda: any(e["kind"] == "broker_up" for e in monitor_log(workspace)), timeout=15)
        broker.stop()
        poll(lambda: any(e["kind"] == "broker_down" for e in monitor_log(workspace)), timeout=15)
        subprocess.run(["tmux", "-L", tmux_server.name, "kill-pane", "-t", s["pane_id"]], check=True)
        poll(lambda: {r["name"]: r["status"] for r in status()}["a"] == "terminated", timeout=10)
        broker.restart()
        poll(
            lambda: [e["kind"] for e in monitor_log(workspace) if e["kind"].startswith("broker_")][-1] == "broker_up",
            timeout=20,
        )
        ups = [e for e in monitor_log(workspace) if e["kind"] == "broker_up"]
        assert "resubscribed" in ups[-1]["detail"]
    finally:
        stop(mon)


def test_a_failed_pane_listing_never_terminates_a_live_session(workspace, tmux_server, monkeypatch):
    from mam.errors import PaneError
    from mam.monitor.sessions import reconcile_sessions
    from mam.panes.tmux import TmuxBackend
    from mam.settings import load_settings
    from mam.store.registry import Registry

    create_demo("alive")

    def broken(self):
        raise PaneError("list-panes failed (a busy server)")

    monkeypatch.setattr(TmuxBackend, "panes", broken)
    registry = Registry(workspace)
    try:
        repairs = reconcile_sessions(workspace, load_settings(env_file=None), registry)
    finally:
        registry.close()
    assert [r for r in repairs if r.what == "terminated"] == []
    assert status()[0]["status"] == "running"
