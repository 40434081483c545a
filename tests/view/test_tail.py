"""`mam tail`: a demo job's transitions and events, in order, live from the broker; the registry when it is down."""

from __future__ import annotations

import json
import queue
import subprocess
import threading
from typing import Any

import pytest

from tests.helpers.jobs import FAST, create_demo
from tests.helpers.mamcli import interrupt, mam, spawn_mam

SHORT = ["--start-deadline", "10", "--heartbeat", "0.5"]


class Reader:
    """Collect a process's stdout lines on a thread, so the test can wait for one with a deadline."""

    def __init__(self, proc: subprocess.Popen[str]) -> None:
        self.proc, self.lines = proc, queue.Queue[str]()
        threading.Thread(target=self._pump, daemon=True).start()

    def _pump(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self.lines.put(line)

    def until(self, check, timeout: float = 60) -> list[dict[str, Any]]:  # type: ignore[no-untyped-def]
        import time

        got: list[dict[str, Any]] = []
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            try:
                got.append(json.loads(self.lines.get(timeout=max(0.01, deadline - time.monotonic()))))
            except queue.Empty:
                break
            if check(got):
                return got
        raise AssertionError(f"tail never printed what was expected; got {got}")


def stop(proc: subprocess.Popen[str]) -> tuple[int, str]:
    """Ctrl-C, then the exit code and stderr (stdout is left to whoever reads it); killed if it lingers."""
    code = interrupt(proc)
    assert proc.stderr is not None
    return code, proc.stderr.read()


def test_tail_json_follows_a_demo_job_in_order_with_matching_seqs(workspace, broker, monkeypatch):  # type: ignore[no-untyped-def]
    for key, value in {**broker.env(), **FAST}.items():
        monkeypatch.setenv(key, value)
    create_demo("w")
    tail = spawn_mam("tail", "--json")
    try:
        reader = Reader(tail)
        job = mam("job", "delegate", "--target", "w", "--brief", "demo-write: a.txt :: x", "--json", *SHORT)
        assert job.returncode == 0, job.stderr
        job_id = json.loads(job.stdout)["id"]
        lines = reader.until(
            lambda got: any(g["job"] == job_id and g["type"] == "completed" and g["kind"] == "transition" for g in got)
        )
    finally:
        code, err = stop(tail)
    assert code == 130, err  # Ctrl-C: 130, as every long-running command
    mine = [g for g in lines if g["job"] == job_id]
    for g in mine:
        assert {"ts", "job", "session", "kind", "type", "seq", "message"} <= set(g) and g["session"] == "w"
    transitions = [g["type"] for g in mine if g["kind"] == "transition"]
    assert transitions == ["pending", "delivering", "delivered", "running", "completed"]
    events = [g for g in mine if g["kind"] == "event"]
    recorded = [
        e for e in json.loads(mam("job", "log", job_id, "--json", check=True).stdout) if e.get("kind") == "input"
    ]
    applied = [e["input"]["seq"] for e in recorded if e["input"]["input"] == "event"]
    assert [e["seq"] for e in events] == applied  # every event the wrapper applied, with its seq, once, in order
    assert events[0]["type"] == "started" and events[-1]["type"] == "completed"
    order = [(g["kind"], g["type"]) for g in mine]
    assert order.index(("event", "started")) < order.index(("transition", "running"))
    assert order.index(("event", "completed")) < order.index(("transition", "completed"))
    running = next(g for g in mine if g["kind"] == "transition" and g["type"] == "running")
    assert running["seq"] == events[0]["seq"]  # a transition carries the seq of the event that caused it
    seqs = [g["seq"] for g in mine]
    assert seqs == sorted(seqs)


def test_tail_with_the_broker_stopped_prints_the_ended_job_and_says_so(workspace, own_broker, monkeypatch):  # type: ignore[no-untyped-def]
    b = own_broker("amqtt")
    for key, value in {**b.env(), **FAST}.items():
        monkeypatch.setenv(key, value)
    create_demo("w", behaviour="error")
    job = mam("job", "delegate", "--target", "w", "--brief", "do it", "--json", *SHORT)
    assert job.returncode == 1
    job_id = json.loads(job.stdout)["id"]
    b.stop()
    tail = spawn_mam("tail", "--json", "--job", job_id, "--all")
    try:
        lines = Reader(tail).until(lambda got: any(g["type"] == "failed" for g in got), timeout=30)
    finally:
        code, err = stop(tail)
    assert code == 130
    assert "the broker is down" in err and "following the registry" in err
    failed = next(g for g in lines if g["type"] == "failed")
    assert failed["kind"] == "transition" and "agent_error" in failed["message"]
    assert any(g["kind"] == "event" and g["type"] == "error" for g in lines)


def test_tail_text_and_filters(workspace, broker, monkeypatch):  # type: ignore[no-untyped-def]
    for key, value in {**broker.env(), **FAST}.items():
        monkeypatch.setenv(key, value)
    create_demo("a")
    create_demo("b")
    for name in ("a", "b"):
        assert (
            mam("job", "delegate", "--target", name, "--brief", f"demo-write: {name}.txt :: x", *SHORT).returncode == 0
        )
    tail = spawn_mam("tail", "--session", "b", "--all")
    try:
        assert tail.stdout is not None
        first = tail.stdout.readline()
    finally:
        code, _ = stop(tail)
    assert code == 130
    text = first + tail.stdout.read()
    assert " b " in first and "-> pending" in first
    assert " a " not in text.replace("-> a", "")
    assert mam("tail", "--since", "1", "--all").returncode == 2


@pytest.mark.parametrize("args", [["tail", "--help"], ["top", "--help"]])
def test_help_explains(args):  # type: ignore[no-untyped-def]
    out = " ".join(mam(*args, check=True).stdout.split())
    assert "It never starts a broker, a pane or a session." in out


def test_loop_steps_are_lines_as_the_loop_log_grows(workspace):  # type: ignore[no-untyped-def]
    """A loop's log, written by the loop's own writer, becomes `loop` lines; a torn last line waits for its end."""
    from mam.loop.files import LoopFiles, LoopLog
    from mam.view.feed import Feed

    workspace.ensure_state()
    files = LoopFiles(workspace, "loop-tail-1")
    log = LoopLog(files.log, "loop-tail-1")
    feed = Feed(workspace)
    log("verdict", round=1, reviewer="rev-1", verdict="NOT PASS", reason="", wellformed=True, job="job-a", report="")
    first = feed.read()
    assert [(x.kind, x.type, x.seq, x.session, x.job, x.loop) for x in first] == [
        ("loop", "verdict", 1, "rev-1", "job-a", "loop-tail-1")
    ]
    assert "rev-1: NOT PASS" in first[0].message
    with open(files.log, "a") as f:
        f.write('{"event": "end", "loop": "loop-tail-1"')  # half a line: a writer caught mid-append
    assert feed.read() == []
    with open(files.log, "a") as f:
        f.write(', "state": "passed", "reason": "all passed", "exit_code": 0, "rounds": 1, "ts": 1}\n')
    (end,) = feed.read()
    assert end.type == "end" and "passed" in end.message
    assert Feed(workspace, session="someone-else").read() == []


def test_session_audit_lines_are_tail_lines_for_the_fork_and_its_source(workspace):  # type: ignore[no-untyped-def]
    """A fork's audit line (mam.sessions.audit) becomes a `session` line, shown for the new session and its source."""
    from mam.sessions import audit
    from mam.view.feed import Feed

    workspace.ensure_state()
    feed = Feed(workspace)
    assert feed.read() == []
    audit.append(workspace, "fork", session="copy", by="alice@box", source="src", conversation="c2")
    (line,) = feed.read()
    assert (line.kind, line.type, line.session, line.message) == ("session", "fork", "copy", "from src by alice@box")
    assert "session fork" in line.text() and line.as_json()["kind"] == "session"
    assert feed.read() == []
    assert [x.session for x in Feed(workspace, session="src").read()] == ["copy"]
    assert Feed(workspace, session="someone-else").read() == []


def test_routine_ticks_are_tail_lines_and_top_shows_the_next_tick(workspace):  # type: ignore[no-untyped-def]
    """A routine's receipts (mam.routines) become `routine` lines, one per change of a tick's status, with the
    routine's next tick; `mam top --snapshot` lists the routine with its next tick and last receipt."""
    from mam.routines.manage import Spec, add
    from mam.store import routines as table
    from mam.store.registry import Registry
    from mam.view.feed import Feed

    registry = Registry(workspace)
    try:
        add(registry, Spec(name="sweep", target="tmux:w", brief="sweep", every="10m"), now=1_800_000_000.0)
        feed = Feed(workspace)
        assert feed.read() == []
        with registry.write() as conn:
            n = table.add_tick(
                conn, routine="sweep", key="routine:sweep:x", trigger="schedule", scheduled=1_800_000_600.0,
                now=1_800_000_600.0, status="skipped", reason="active", detail="job j-1 is still open",
            )  # fmt: skip
        (line,) = feed.read()
        assert (line.kind, line.type, line.routine, line.session, line.seq) == ("routine", "skipped", "sweep", "w", n)
        assert "active: job j-1 is still open; next tick 2027-01-15T08:10:00Z" in line.message
        assert "routine skipped" in line.text() and line.as_json()["routine"] == "sweep"
        assert feed.read() == []
        assert Feed(workspace, session="someone-else").read() == []
    finally:
        registry.close()
    top = mam("top", "--snapshot", "--width", "200", check=True).stdout
    assert "ROUTINES (1)" in top
    row = next(line for line in top.splitlines() if line.startswith("sweep"))
    assert "every 10m" in row and "2027-01-15T08:10:00Z" in row and "skipped active" in row and "tmux:w" in row


def test_a_sent_line_is_a_tail_line_of_its_job_without_the_text(workspace):  # type: ignore[no-untyped-def]
    """`mam job send`'s audit line (`sent`: by, bytes, sha256) becomes one short `audit` line of the job, in
    its place among the transitions; `by` is shown without control sequences."""
    from mam.store import journal
    from mam.store.registry import Registry
    from mam.view.feed import Feed
    from tests.helpers.jobs import register_delivered

    registry = Registry(workspace)
    try:
        ledger = register_delivered(workspace, registry, topic_prefix="t", started=True)
        feed = Feed(workspace, job=ledger.job.id)
        assert [x.kind for x in feed.read()] == ["transition"]  # created
        journal.note(registry, ledger.job.id, "sent", by="bob@box\x1b[2J", pane="%1", bytes=12, sha256="ab" * 32)
        (line,) = feed.read()
        assert (line.kind, line.type, line.job, line.session) == ("audit", "sent", ledger.job.id, "worker")
        assert line.message == "by bob@box (12 bytes)" and "\x1b" not in line.text()
        assert " sent " in line.text() and line.as_json()["kind"] == "audit"
        assert feed.read() == []
    finally:
        registry.close()


def test_a_tasks_wakes_and_dispositions_are_tail_lines_and_top_shows_tasks_and_roles(
    workspace, mosquitto_broker, monkeypatch
):  # type: ignore[no-untyped-def]
    """Issue 42: each wake of a task is a `task woken` line (its reason), and its job's end one more (the outcome,
    the agent's disposition, the state the task moved to); `mam top --snapshot` lists the tasks as a tree with
    what holds a todo one, and the roles with their runs and breakers (a tripped one in the header too)."""
    for key, value in {**mosquitto_broker.env(), **FAST}.items():
        monkeypatch.setenv(key, value)
    create_demo("w")
    create_demo("x", behaviour="error")
    mam("role", "add", "dev", "--session", "w", check=True)
    mam("role", "add", "ops", "--session", "x", "--breaker", "1", check=True)
    tail = spawn_mam("tail", "--json")
    try:
        reader = Reader(tail)
        draft = mam("task", "add", "Draft", "--role", "dev", "--brief", "demo-disposition: review", check=True)
        first = draft.stdout.strip()
        second = mam("task", "add", "Publish", "--role", "dev", "--parent", first, "--blocked-by", first, check=True)
        lines = reader.until(lambda got: any(g["kind"] == "task" and g["type"] == "in_review" for g in got))
        broken = mam("task", "add", "Break", "--role", "ops", check=True).stdout.strip()
        lines += reader.until(lambda got: any(g["kind"] == "task" and g["type"] == "failed" for g in got))
    finally:
        code, err = stop(tail)
    assert code == 130, err  # Ctrl-C: 130, as every long-running command
    tasks = [g for g in lines if g["kind"] == "task"]
    assert [(g["task"], g["type"], g["job"]) for g in tasks] == [
        (first, "woken", f"{first}-r1"),
        (first, "in_review", f"{first}-r1"),
        (broken, "woken", f"{broken}-r1"),
        (broken, "failed", f"{broken}-r1"),
    ]
    assert tasks[0]["message"] == f"{first}: woken (assigned) on w" and tasks[0]["session"] == "w"
    assert tasks[1]["message"].startswith(f"{first}: job completed, disposition review; the task is in_review")
    assert tasks[3]["message"].startswith(f"{broken}: job failed; the task is failed (agent_error")
    try:
        top = mam("top", "--snapshot", "--width", "200", check=True).stdout
    finally:
        mam("node", "stop")
    assert "BREAKER TRIPPED: ops" in top and "TASKS (3)" in top and "ROLES (2)" in top
    rows = {line.split()[0]: line for line in top.splitlines() if line.startswith(("t-", "dev ", "ops "))}
    assert "in_review" in rows[first] and "Draft" in rows[first]
    assert "todo (blockers)" in rows[second.stdout.strip()] and "  Publish" in rows[second.stdout.strip()]
    assert "TRIPPED (1 failed): mam role reset ops" in rows["ops"] and rows["dev"].split()[-1] == "0/3"


def test_interrupt_ends_the_loop_at_its_next_look_and_close_lets_go_of_the_pipe(workspace, monkeypatch):  # type: ignore[no-untyped-def]
    """Ctrl-C reaches the loop as `interrupt()` (the CLI's SIGINT handler calls it): no exception is raised
    wherever the loop happens to be (one raised inside `queue.Queue.get` once ended `mam tail` with a RuntimeError,
    exit 1, in CI). The loop, waiting for a wake that is not coming, ends at once; a job named by a wake from
    another thread is read first."""
    import os

    from mam.settings import load_settings
    from mam.util.poll import wait_for
    from mam.view.tail import Note, Tail

    monkeypatch.setenv("MQTT_PORT", "1")  # no broker: the loop sweeps the registry, woken or not
    got: list[object] = []
    read: list[list[str]] = []
    tail = Tail(workspace, load_settings(env_file=workspace.env_file), got.append)
    real_read = tail.feed.read
    monkeypatch.setattr(tail.feed, "read", lambda ids=None: read.append(list(ids or [])) or real_read(ids))
    runner = threading.Thread(target=tail.run, daemon=True)
    runner.start()
    wait_for(lambda: any(isinstance(g, Note) for g in got), timeout=30, message="the broker-down note")
    waker = threading.Thread(target=tail.wake, args=("job-0123456789abcdef",))
    waker.start()
    waker.join()
    wait_for(lambda: ["job-0123456789abcdef"] in read, timeout=30, message="the woken job read")
    tail.interrupt()
    runner.join(timeout=30)
    assert not runner.is_alive() and tail.interrupted
    fds = (tail._pipe._r, tail._pipe._w)
    tail.close()
    for fd in fds:
        with pytest.raises(OSError):
            os.fstat(fd)
    tail.wake("job-0123456789abcdef")  # a late wake writes nowhere (the numbers may be another file's now)
