"""`mam event` (mam/cli/event.py over mam/jobs/emit.py) and the job's one wake channel (mam.util.pokes).

A real `mam event` process against a job registered in a temporary workspace: with the wrapper's
Intake woken through a Waiter on the job's `events:<id>` key (a real Mosquitto), the event is
committed, the wrapper is poked, takes the event from the store and relays it to MQTT, and the echo
of its own relay does not wake it. A FIFO folder others could use is refused;
with no wrapper listening the event is still recorded, and published by the agent's process itself.
"""

from __future__ import annotations

import json
import os
import queue
import stat
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

import mam
from mam.bus.envelope import Envelope
from mam.bus.mqtt import MqttClient
from mam.bus.topics import Topics
from mam.jobs.intake import Intake
from mam.jobs.ledger import Ledger
from mam.jobs.model import End, JobState
from mam.jobs.record import now_ms
from mam.outcomes import Exit, Reason
from mam.store import jobs as jobs_table
from mam.store.registry import Registry
from mam.util import pokes
from mam.util.poll import wait_for
from mam.workspace import Workspace
from tests.helpers.brokers import RunningBroker
from tests.helpers.jobs import register_delivered

PREFIX = "test/event"
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


def test_the_usual_event_pokes_the_wrapper_and_imports_no_paho_or_yaml(job) -> None:
    ws, registry, ledger = job
    woken = threading.Event()
    wrapper = pokes.Waiter(ws, [pokes.events_key(ledger.job.id)])
    wrapper.relay(woken.set)
    code = (
        "import json, sys\n"
        f"sys.argv = ['mam', 'event', 'progress', '--job', {ledger.job.id!r}, '--message', 'half way']\n"
        "from mam.node.front import main\n"
        "code = main(sys.argv[1:])\n"
        "print(json.dumps({'code': code, 'modules': sorted(sys.modules)}), file=sys.stderr)\n"
    )
    try:
        proc = subprocess.run(
            [sys.executable, "-c", code], cwd=ws.root, capture_output=True, text=True, timeout=60, check=False
        )
        assert woken.wait(10), proc.stderr
    finally:
        wrapper.close()
    report = json.loads(proc.stderr.strip().splitlines()[-1])
    assert report["code"] == 0 and "handed to the wrapper" in proc.stdout, proc.stdout + proc.stderr
    tops = {m.split(".")[0] for m in report["modules"]}
    assert {"paho", "yaml"}.isdisjoint(tops), sorted(tops)  # the broker only when no wrapper listens
    raw = registry.events_after(ledger.job.id)[-1].raw
    env = Envelope.decode(raw)
    assert env.verify(ledger.token) and env.body == {"message": "half way"} and env.sender == "agent"


def test_the_script_started_with_no_site_still_finds_an_editable_mam(job) -> None:
    """mam/bin/mam under `python -S` (deploy/install.sh's first line): in this venv, editable or not, mam is
    found (through its .pth file, `site` run by the script, when the venv's site-packages lacks it)."""
    ws, registry, ledger = job
    script = str(Path(mam.__file__).resolve().parent / "bin" / "mam")
    woken = threading.Event()
    wrapper = pokes.Waiter(ws, [pokes.events_key(ledger.job.id)])
    wrapper.relay(woken.set)
    argv = [sys.executable, "-S", script, "event", "progress", "--job", ledger.job.id, "--message", "no site"]
    try:
        proc = subprocess.run(argv, cwd=ws.root, capture_output=True, text=True, timeout=60, check=False)
        assert proc.returncode == 0 and "handed to the wrapper" in proc.stdout, proc.stdout + proc.stderr
        assert woken.wait(10)
    finally:
        wrapper.close()
    assert Envelope.decode(registry.events_after(ledger.job.id)[-1].raw).body == {"message": "no site"}
    version = subprocess.run(
        [sys.executable, "-S", script, "--version"], capture_output=True, text=True, timeout=60, check=False
    )
    assert version.returncode == 0 and version.stdout == f"mam, version {mam.__version__}\n", version.stderr


def test_help_and_usage_errors(job) -> None:
    ws, _registry, _ledger = job
    out = event(ws, "progress", "--help")
    assert out.returncode == 0 and out.stdout.startswith("Usage: mam event progress [OPTIONS]")
    assert "--message TEXT" in out.stdout
    assert event(ws, "--help").stdout.startswith("Usage: mam event [OPTIONS] COMMAND [ARGS]...")
    bare = event(ws)
    assert bare.returncode == 2 and bare.stderr.startswith("Usage: mam event [OPTIONS] COMMAND [ARGS]...")
    bad = event(ws, "progress", "--job", "job-0123456789abcdef")
    assert bad.returncode == 2 and bad.stderr == "mam: error: missing option --message\n"  # one line
    unknown = event(ws, "progress", "--job", "job-0123456789abcdef", "--message", "m")
    assert unknown.returncode == 5 and "no job 'job-0123456789abcdef'" in unknown.stderr
    tokens = event(ws, "completed", "--job", "job-0123456789abcdef", "--tokens", "x")
    assert tokens.returncode == 2 and tokens.stderr == "mam: error: --tokens: 'x' is not a whole number\n"
    negative = event(ws, "completed", "--job", "job-0123456789abcdef", "--tokens", "-1")
    assert negative.returncode == 2 and "--tokens must be a whole number of tokens, 0 or more" in negative.stderr
    folder = event(ws, "completed", "--job", "job-0123456789abcdef", "--report", str(ws.root))
    assert folder.returncode == 2 and folder.stderr == f"mam: error: --report {str(ws.root)!r} is a directory\n"
    stray = event(ws, "heartbeat", "--job", "job-0123456789abcdef", "--nonce", "n")
    assert stray.returncode == 2 and stray.stderr == "mam: error: no such option: --nonce\n"


def test_the_bodies_and_seqs_of_each_command(job) -> None:
    ws, registry, ledger = job
    (ws.root / "r.md").write_text("the report\n")
    cases = [
        (["started"], {"nonce": "n0nce", "nonce_from": "record"}),
        (["started", "--nonce", "n0nce"], {"nonce": "n0nce"}),
        (["progress", "--message", "naïve ✓ " * 600], None),
        (["heartbeat"], {}),
        (["completed", "--message", "done", "--tokens", "12"], {"message": "done", "tokens": 12}),
    ]
    for args, body in cases:
        out = event(ws, args[0], "--job", ledger.job.id, "-w", str(ws.root), *args[1:])
        assert out.returncode == 0 and f"{args[0]} recorded for {ledger.job.id}" in out.stdout, out.stderr
        env = Envelope.decode(registry.events_after(ledger.job.id)[-1].raw)
        assert env.verify(ledger.token) and (env.type, env.sender) == (args[0], "agent")
        if body is not None:
            assert dict(env.body) == body
        else:
            assert len(env.body["message"]) == 4000
    with registry.read() as conn:
        assert [e.seq for e in jobs_table.events_after(conn, ledger.job.id)] == list(range(1, 6))
    # Once the job has ended, nothing more is recorded (exit 1).
    ledger.apply(
        End(at=now_ms(), state=JobState.CANCELLED, reason=Reason.CANCELLED_BY_USER, exit_code=Exit.NOT_DELIVERED)
    )
    late = event(ws, "error", "--job", ledger.job.id, "--reason", "late")
    assert late.returncode == 1 and "already ended: cancelled" in late.stderr, late.stderr
    assert len(registry.events_after(ledger.job.id)) == 5


def test_a_report_is_read_from_the_callers_folder(job) -> None:
    ws, registry, ledger = job
    (ws.root / "r.md").write_text("the report\n")
    out = event(ws, "completed", "--job", ledger.job.id, "--report", "r.md", "--json")
    assert out.returncode == 0, out.stderr
    env = Envelope.decode(registry.events_after(ledger.job.id)[-1].raw)
    assert env.body["report"] == "the report\n" and env.body["report_path"] == str(ws.root / "r.md")


def test_the_wrapper_is_poked_reads_the_store_and_relays_the_signed_event(job, mosquitto_broker: RunningBroker) -> None:
    ws, registry, ledger = job
    topic = Topics(PREFIX).events(ledger.job.id)
    seen: queue.Queue[bytes] = queue.Queue()
    with (
        MqttClient(mosquitto_broker.endpoint()).connect(timeout=10) as observer,
        MqttClient(mosquitto_broker.endpoint()).connect(timeout=10) as client,
    ):
        observer.subscribe(topic, lambda _t, payload, _r: seen.put(payload), timeout=10)
        intake = Intake(ledger, registry, local=True)
        intake.attach(client, topic, timeout=10)
        wrapper = pokes.Waiter(ws, [pokes.events_key(ledger.job.id)])  # as mam.jobs.attempt's, relayed
        wrapper.relay(intake.wake)
        try:
            # No broker settings: the agent's process cannot publish; the wrapper does it for it.
            out = event(ws, "progress", "--job", ledger.job.id, "--message", "via a poke", "--json")
            assert out.returncode == 0, out.stderr
            shown = json.loads(out.stdout)
            assert shown["via"] == "wrapper" and shown["published"] is False and out.stderr == ""
            wait_for(lambda: (intake.pump(0.5), ledger.job.last_seq == shown["seq"])[1], timeout=10)
            relayed = Envelope.decode(seen.get(timeout=10))
            assert relayed.verify(ledger.token) and relayed.body == {"message": "via a poke"}
            # The echo of its own relay comes back on its subscription: kept for the next pump (or taken
            # by the last pump above, when it came back during it), never queued as a message.
            wait_for(lambda: not intake._relayed, timeout=10)
            queued = []
            while not intake._queue.empty():
                queued.append(intake._queue.get_nowait())
            assert all(p == b"" for p in queued) and len(intake._echoes) <= 1, queued  # (b"": a poke's wake-up)
            assert ledger.job.last_seq == shown["seq"]  # applied once
        finally:
            wrapper.close()
        out = event(ws, "progress", "--job", ledger.job.id, "--message", "no wrapper", env=mosquitto_broker.env())
        assert out.returncode == 0 and "published" in out.stdout, out.stdout + out.stderr
        assert Envelope.decode(seen.get(timeout=10)).body == {"message": "no wrapper"}


def test_with_no_wrapper_and_no_broker_the_event_stays_on_disk(job) -> None:
    ws, registry, ledger = job
    outside = pokes.Waiter(ws, [pokes.job_key(ledger.job.id)])  # `mam job wait`: not a wrapper
    try:
        out = event(ws, "heartbeat", "--job", ledger.job.id, env={"MAM_NO_AUTOSTART": "1"})
        assert out.returncode == 0 and "on disk only" in out.stdout, out.stdout + out.stderr
        assert "warning" in out.stderr and outside.wait(10)
    finally:
        outside.close()
    assert [e.type for e in registry.events_after(ledger.job.id)] == ["heartbeat"]


@pytest.mark.parametrize("what", ["folder mode", "fifo owner"])
def test_a_wake_folder_others_could_use_is_refused(job, what: str) -> None:
    """Guarantee 13: a poke reaches only this user's FIFOs in a folder only this user may use; a waiter
    refuses to listen anywhere else. Nobody else can take a job's wake-up (the emitter would then
    leave the relay to a wrapper that is not there)."""
    ws, _registry, ledger = job
    key = [pokes.events_key(ledger.job.id)]
    waiter = pokes.Waiter(ws, key)
    folder = pokes.folder(ws)
    try:
        assert pokes.poke(ws, key) == 1
        if what == "folder mode":
            os.chmod(folder, 0o777)
        else:
            if os.geteuid() != 0:
                pytest.skip("needs root to give the FIFO to another user")
            for name in waiter.names:
                os.chown(name, 65534, 65534)
        assert pokes.poke(ws, key) == 0
        if what == "folder mode":
            with pytest.raises(PermissionError, match="not a private folder"):
                pokes.Waiter(ws, key)
            out = event(ws, "heartbeat", "--job", ledger.job.id, env={"MAM_NO_AUTOSTART": "1"})
            assert out.returncode == 0 and "on disk only" in out.stdout, out.stdout + out.stderr
    finally:
        os.chmod(folder, stat.S_IRWXU)
        waiter.close()
