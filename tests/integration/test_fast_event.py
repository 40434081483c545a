"""The lean `mam event` path (mam/fast_event.py) and the wake socket (mam/jobs/wake.py).

A real `mam event` process against a job registered in a temporary workspace: with the wrapper's
Intake listening (a real Mosquitto), the event is committed, the wrapper is woken over the socket,
takes the event from the store and relays it to MQTT; the agent's process imports no click, paho
or YAML. A socket or folder with the wrong mode (or owner) is refused; with no wrapper listening the
event is still recorded, and published by the agent's process itself.
"""

from __future__ import annotations

import json
import os
import queue
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from mam import fast_event
from mam.bus.envelope import Envelope
from mam.bus.mqtt import MqttClient
from mam.bus.topics import Topics
from mam.jobs import wake
from mam.jobs.intake import Intake, Listener
from mam.jobs.ledger import Ledger
from mam.store import jobs as jobs_table
from mam.store.registry import Registry
from mam.util.poll import wait_for
from mam.workspace import Workspace
from tests.helpers.brokers import RunningBroker
from tests.helpers.jobs import register_delivered

PREFIX = "test/fast-event"
MAM = [sys.executable, "-m", "mam"]


def register(ws: Workspace, registry: Registry) -> Ledger:
    """A running job, as its wrapper has it after `started`."""
    return register_delivered(ws, registry, topic_prefix=PREFIX, started=True)


@pytest.fixture
def job(tmp_path: Path) -> Iterator[tuple[Workspace, Registry, Ledger]]:
    ws = Workspace((tmp_path / "ws").resolve())
    ws.root.mkdir()
    registry = Registry(ws)
    try:
        yield ws, registry, register(ws, registry)
    finally:
        registry.close()


def event(ws: Workspace, *args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*MAM, "event", *args],
        cwd=ws.root,
        env={**os.environ, **(env or {})},
        capture_output=True,
        text=True,
        timeout=60,
    )


def test_the_usual_event_takes_the_lean_path_and_imports_no_click_paho_or_yaml(job) -> None:
    ws, registry, ledger = job
    woken = threading.Event()
    listener = Listener(ws, ledger.job.id, woken.set)
    assert listener.start() == ""
    code = (
        "import json, sys\n"
        f"sys.argv = ['mam', 'event', 'progress', '--job', {ledger.job.id!r}, '--message', 'half way']\n"
        "from mam.entry import main\n"
        "try:\n    main()\nexcept SystemExit as e:\n    code = e.code\n"
        "print(json.dumps({'code': code, 'modules': sorted(sys.modules)}), file=sys.stderr)\n"
    )
    try:
        proc = subprocess.run(
            [sys.executable, "-c", code], cwd=ws.root, capture_output=True, text=True, timeout=60, check=False
        )
        assert woken.wait(10), proc.stderr
    finally:
        listener.close()
    report = json.loads(proc.stderr.strip().splitlines()[-1])
    assert report["code"] == 0 and "handed to the wrapper" in proc.stdout, proc.stdout + proc.stderr
    tops = {m.split(".")[0] for m in report["modules"]}
    assert {"click", "paho", "yaml", "filelock", "dataclasses", "ssl"}.isdisjoint(tops), sorted(tops)
    assert {"mam.event_cli", "mam.store.registry", "mam.bus.mqtt"}.isdisjoint(report["modules"])
    raw = registry.events_after(ledger.job.id)[-1].raw
    env = Envelope.decode(raw)
    assert env.verify(ledger.token) and env.body == {"message": "half way"} and env.sender == "agent"


def test_help_and_usage_errors_need_no_click(job) -> None:
    ws, _registry, _ledger = job
    out = event(ws, "progress", "--help")
    assert out.returncode == 0 and out.stdout.startswith("Usage: mam event progress [OPTIONS]")
    assert "--message TEXT" in out.stdout
    assert event(ws, "--help").stdout.startswith("Usage: mam event [OPTIONS] COMMAND [ARGS]...")
    bad = event(ws, "progress", "--job", "job-0123456789abcdef")
    assert bad.returncode == 2 and "Error: Missing option '--message'." in bad.stderr
    unknown = event(ws, "progress", "--job", "job-0123456789abcdef", "--message", "m")
    assert unknown.returncode == 5 and "no job 'job-0123456789abcdef'" in unknown.stderr


def test_the_wrapper_is_woken_reads_the_store_and_relays_the_signed_event(job, mosquitto_broker: RunningBroker) -> None:
    ws, registry, ledger = job
    topic = Topics(PREFIX).events(ledger.job.id)
    seen: queue.Queue[bytes] = queue.Queue()
    with (
        MqttClient(mosquitto_broker.endpoint()).connect(timeout=10) as observer,
        MqttClient(mosquitto_broker.endpoint()).connect(timeout=10) as wrapper,
    ):
        observer.subscribe(topic, lambda _t, payload, _r: seen.put(payload), timeout=10)
        intake = Intake(ledger, registry, local=True)
        intake.attach(wrapper, topic, timeout=10)
        try:
            assert intake.listener is not None
            sock = Path(intake.listener.path)
            assert sock.is_socket() and (sock.stat().st_mode & 0o777) == 0o600
            # No broker settings: the agent's process cannot publish; the wrapper does it for it.
            out = event(ws, "progress", "--job", ledger.job.id, "--message", "via the socket", "--json")
            assert out.returncode == 0, out.stderr
            shown = json.loads(out.stdout)
            assert shown["via"] == "wrapper" and shown["published"] is False and out.stderr == ""
            wait_for(lambda: (intake.pump(0.5), ledger.job.last_seq == shown["seq"])[1], timeout=10)
            relayed = Envelope.decode(seen.get(timeout=10))
            assert relayed.verify(ledger.token) and relayed.body == {"message": "via the socket"}
        finally:
            intake.close()
        assert not sock.exists()  # the wrapper is gone: the agent publishes by itself again
        out = event(ws, "progress", "--job", ledger.job.id, "--message", "no wrapper", env=mosquitto_broker.env())
        assert out.returncode == 0 and "published" in out.stdout, out.stdout + out.stderr
        assert Envelope.decode(seen.get(timeout=10)).body == {"message": "no wrapper"}


def test_with_no_wrapper_and_no_broker_the_event_stays_on_disk(job) -> None:
    ws, registry, ledger = job
    (ws.run_dir / f"wake-{ledger.job.id}.sock").touch(mode=0o600)  # not a socket: e.g. a planted file
    out = event(ws, "heartbeat", "--job", ledger.job.id, env={"MAM_NO_AUTOSTART": "1"})
    assert out.returncode == 0 and "on disk only" in out.stdout, out.stdout + out.stderr
    assert "refusing wake socket" not in out.stderr and "warning" in out.stderr
    assert [e.type for e in registry.events_after(ledger.job.id)] == ["heartbeat"]


@pytest.mark.parametrize("what", ["socket mode", "folder mode", "socket owner"])
def test_a_wake_socket_others_could_use_is_refused(job, what: str) -> None:
    ws, _registry, ledger = job
    listener = Listener(ws, ledger.job.id, lambda: None)
    assert listener.start() == ""
    try:
        run_dir = str(ws.run_dir)
        assert wake.send(run_dir, ledger.job.id) == ""
        if what == "socket mode":
            os.chmod(listener.path, 0o666)
        elif what == "folder mode":
            os.chmod(run_dir, 0o777)
        else:
            if os.geteuid() != 0:
                pytest.skip("needs root to give the socket to another user")
            os.chown(listener.path, 65534, 65534)
        problem = wake.send(run_dir, ledger.job.id)
        assert problem and problem != wake.ABSENT, problem
        # ... and a wrapper refuses to listen in a folder others may write.
        if what == "folder mode":
            assert "not a private folder" in Listener(ws, ledger.job.id, lambda: None).start()
    finally:
        os.chmod(ws.run_dir, 0o700)
        listener.close()


def test_the_lean_path_gives_the_full_paths_bodies_and_mirrors_its_constants(job) -> None:
    from mam.bus import envelope
    from mam.event_cli import main as full
    from mam.store import db

    ws, registry, ledger = job
    assert (fast_event.VERSION, fast_event.MAX_EVENT_BYTES, fast_event.MAX_INT) == (
        envelope.VERSION,
        envelope.MAX_EVENT_BYTES,
        envelope.MAX_INT,
    )
    assert (fast_event.SCHEMA_VERSION, fast_event.BUSY_TIMEOUT_MS) == (db.SCHEMA_VERSION, db.BUSY_TIMEOUT_MS)
    from mam.util import root

    assert (fast_event.DB_FILE, root.STATE_DIR) == (ws.db_path.name, ws.state.name)
    assert root.ENV_FILE == ws.env_file.name
    from mam.store import write_queue  # the queue both paths take: one file, inside .mam/locks/

    assert write_queue.lock_path(str(ws.db_path)) == str(ws.locks_dir / "agent-sessions-write.lock")
    cases = [
        ["started"],
        ["started", "--nonce", "n0nce"],
        ["progress", "--message", "naïve ✓ " * 600],
        ["heartbeat"],
        ["completed", "--message", "done"],
    ]
    bodies = []
    for args in cases:
        argv = [args[0], "--job", ledger.job.id, "-w", str(ws.root), *args[1:]]
        assert fast_event.run(argv) == 0
        assert full(argv) == 0
        rows = registry.events_after(ledger.job.id)[-2:]
        fast, slow = (Envelope.decode(r.raw) for r in rows)
        assert fast.verify(ledger.token) and slow.verify(ledger.token)
        assert (fast.type, fast.sender, dict(fast.body)) == (slow.type, slow.sender, dict(slow.body))
        bodies.append(dict(fast.body))
    assert bodies[0] == {"nonce": "n0nce", "nonce_from": "record"} and len(bodies[2]["message"]) == 4000
    with registry.read() as conn:
        assert [e.seq for e in jobs_table.events_after(conn, ledger.job.id)] == list(range(1, 11))
    # What the lean path leaves to the full one: help, --report, an unknown job, bad text.
    for argv in (
        ["progress", "--help"],
        ["completed", "--job", ledger.job.id, "--report", "r.md"],
        ["progress", "--job", "job-0123456789abcdef", "--message", "m"],
        ["progress", "--job", ledger.job.id, "--message", "\udcff"],
    ):
        assert fast_event.run([*argv, "-w", str(ws.root)]) is None, argv
    assert len(registry.events_after(ledger.job.id)) == 10
