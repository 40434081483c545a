"""`mam top`: the snapshot in a real tmux pane, and the TUI driven with Textual's Pilot."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
from collections.abc import Callable
from typing import Any

import pytest

from mam.panes.tmux import socket_path
from mam.util.poll import wait_for
from tests.helpers.jobs import FAST, create_demo
from tests.helpers.mamcli import MAM, mam, spawn_mam
from tests.helpers.tmux import private_tmux


def job_state(job_id: str) -> str:
    proc = mam("job", "status", job_id, "--json")
    return json.loads(proc.stdout)["state"] if proc.returncode == 0 else ""


@pytest.fixture
def busy_workspace(workspace, broker, monkeypatch):  # type: ignore[no-untyped-def]
    """Sessions in each state: `busy` runs a job, `stuck` has one delivered and never started, `quiet`
    is idle, `gone` is stopped. Yields (workspace, {session: job id})."""
    for key, value in {**broker.env(), **FAST}.items():
        monkeypatch.setenv(key, value)
    create_demo("busy", behaviour="slow", env={"MAM_DEMO_SLEEP_S": "120"})
    create_demo("stuck", behaviour="never_start")
    create_demo("quiet")
    create_demo("gone")
    mam("session", "stop", "--session", "gone", check=True)
    wrappers, jobs = [], {}
    for name in ("busy", "stuck"):
        job_id = f"job-top-{name}"
        wrappers.append(
            spawn_mam(
                "job", "delegate", "--target", name, "--brief", "take your time", "--job-id", job_id,
                "--start-deadline", "200", "--heartbeat", "30", "--timeout", "600",
            )
        )  # fmt: skip
        jobs[name] = job_id
    try:
        wait_for(lambda: job_state(jobs["busy"]) == "running", timeout=60, message="busy's job running")
        wait_for(lambda: job_state(jobs["stuck"]) == "delivered", timeout=60, message="stuck's job delivered")
        yield workspace, jobs
    finally:
        for job_id in jobs.values():
            mam("job", "cancel", job_id)
        for w in wrappers:
            try:
                w.wait(timeout=60)
            except subprocess.TimeoutExpired:
                w.kill()
                w.wait()


def row_of(text: str, needle: str) -> str:
    return next(line for line in text.splitlines() if needle in line and not line.startswith("mam top"))


def test_snapshot_in_a_real_tmux_pane_shows_sessions_jobs_bars_and_dots(busy_workspace):  # type: ignore[no-untyped-def]
    ws, jobs = busy_workspace
    viewer = private_tmux()
    try:
        env = {
            "MAM_WORKSPACE": str(ws.root),
            **{k: v for k, v in os.environ.items() if k.startswith(("MQTT_", "MAM_"))},
        }
        argv = ["env", *(f"{k}={v}" for k, v in env.items()), MAM, "top", "--snapshot", "--width", "170"]
        subprocess.run(["tmux", "-L", viewer.name, "new-session", "-d", "-x", "180", "-y", "50", "-s", "v"], check=True)
        subprocess.run(["tmux", "-L", viewer.name, "set-option", "-g", "remain-on-exit", "on"], check=True)
        subprocess.run(["tmux", "-L", viewer.name, "respawn-pane", "-k", "-t", "v", *argv], check=True)

        def screen() -> str:
            return subprocess.run(
                ["tmux", "-L", viewer.name, "capture-pane", "-p", "-S", "-", "-t", "v"], capture_output=True, text=True
            ).stdout

        wait_for(lambda: "dots:" in screen(), timeout=60, message="the snapshot on the pane")
        text = screen()
    finally:
        viewer.kill()
    assert "broker up" in text
    busy, stuck, quiet, gone = (row_of(text, f"  {n}  ") for n in ("busy", "stuck", "quiet", "gone"))
    assert busy.startswith("●") and " working " in busy and " event " in busy and jobs["busy"] in busy
    assert stuck.startswith("●") and " job " in stuck and jobs["stuck"] in stuck
    assert quiet.startswith("○") and " idle " in quiet and " process " in quiet
    assert gone.startswith("■") and " stopped " in gone
    job_busy = next(line for line in text.splitlines() if line.startswith(f"{jobs['busy']} "))
    assert " running " in job_busy and "░" in job_busy and "%" in job_busy  # the liveness and wall bars
    job_stuck = next(line for line in text.splitlines() if line.startswith(f"{jobs['stuck']} "))
    assert " delivered " in job_stuck and job_stuck.count("%") == 2  # the start and wall bars
    assert all(len(line) <= 170 for line in text.splitlines())


def test_pilot_selects_filters_and_cancels_a_job_after_confirming(busy_workspace):  # type: ignore[no-untyped-def]
    from textual.widgets import DataTable, Input

    from mam.settings import load_settings
    from mam.view.top import Confirm, TopApp

    ws, jobs = busy_workspace
    settings = load_settings(env_file=ws.env_file)
    app = TopApp(ws, settings)

    async def drive() -> tuple[str, str]:
        async with app.run_test(size=(200, 50)) as pilot:

            async def until(check, what: str) -> None:  # type: ignore[no-untyped-def]
                for _ in range(600):
                    if check():
                        return
                    await pilot.pause(0.05)
                raise AssertionError(f"never: {what}")

            sessions = app.query_one("#sessions", DataTable)
            jobs_table = app.query_one("#jobs", DataTable)
            await until(lambda: sessions.row_count == 4 and jobs_table.row_count == 2, "4 sessions and 2 jobs")
            await until(lambda: app.broker == "up", "the broker is up")
            # filter: only the stuck session and its job stay
            await pilot.press("slash")
            assert isinstance(app.focused, Input)
            await pilot.press(*"stuck")
            await until(lambda: sessions.row_count == 1 and jobs_table.row_count == 1, "the filter applied")
            await pilot.press("enter")
            assert app.focused is sessions
            await pilot.press("escape")
            await until(lambda: sessions.row_count == 4, "the filter cleared")
            # select busy's job, refuse the confirmation, then confirm
            jobs_table.focus()
            keys = [str(jobs_table.coordinate_to_cell_key((r, 0)).row_key.value) for r in range(jobs_table.row_count)]
            jobs_table.move_cursor(row=keys.index(jobs["busy"]))
            await pilot.press("c")
            await until(lambda: isinstance(app.screen, Confirm), "the confirmation")
            await pilot.press("n")
            await until(lambda: not isinstance(app.screen, Confirm), "the confirmation closed")
            first = job_state(jobs["busy"])
            await pilot.press("c")
            await until(lambda: isinstance(app.screen, Confirm), "the confirmation again")
            await pilot.press("y")
            await until(lambda: jobs_table.row_count == 1, "the cancelled job left the table")
            # Enter on a session asks to attach to it
            sessions.focus()
            names = [str(sessions.coordinate_to_cell_key((r, 0)).row_key.value) for r in range(sessions.row_count)]
            sessions.move_cursor(row=names.index("quiet"))
            await pilot.press("enter")
            await until(lambda: app.return_value is not None, "the app ended")
            return first, job_state(jobs["busy"])

    before, after = asyncio.run(drive())
    assert before == "running"  # "n" left it alone
    assert after == "cancelled"
    assert app.return_value == ("attach", "quiet")


def test_attach_prints_commands_that_run_and_refuses_a_stopped_session(workspace, tmux_server):  # type: ignore[no-untyped-def]
    s = create_demo("quiet")
    create_demo("gone")
    mam("session", "stop", "--session", "gone", check=True)
    proc = mam("session", "attach", "quiet", "--print", check=True)
    lines = proc.stdout.splitlines()
    # By the socket the session's row recorded (whatever the attaching terminal's TMUX_TMPDIR says).
    assert lines[-1] == f"tmux -S {socket_path(tmux_server.name)} attach-session -t {s['pane_id']}"
    for line in lines[:-1]:  # the selection steps run as printed
        assert subprocess.run(line.split(), capture_output=True).returncode == 0
    refused = mam("session", "attach", "gone")
    assert refused.returncode == 5 and "mam session resume --session gone" in refused.stderr
    assert mam("session", "attach", "nobody").returncode == 5


def test_attach_from_a_terminal_puts_it_on_the_pane(workspace, tmux_server):  # type: ignore[no-untyped-def]
    """Run `mam session attach` in a pane of another tmux server: that pane becomes a client of the session's."""
    create_demo("quiet")
    viewer = private_tmux()
    try:
        env = [f"{k}={v}" for k, v in os.environ.items() if k.startswith(("MAM_", "PATH", "HOME"))]
        subprocess.run(["tmux", "-L", viewer.name, "new-session", "-d", "-x", "120", "-y", "40", "-s", "v"], check=True)
        subprocess.run(
            [
                "tmux",
                "-L",
                viewer.name,
                "respawn-pane",
                "-k",
                "-t",
                "v",
                "env",
                *env,
                MAM,
                "session",
                "attach",
                "quiet",
            ],
            check=True,
        )

        def clients() -> str:
            return subprocess.run(
                ["tmux", "-L", tmux_server.name, "list-clients"], capture_output=True, text=True
            ).stdout

        wait_for(lambda: clients().strip() != "", timeout=30, message="a client on the session's server")
    finally:
        viewer.kill()


def tmux_format(server: str, fmt: str) -> str:
    return subprocess.run(
        ["tmux", "-L", server, "display", "-p", "-t", "v", fmt], capture_output=True, text=True, check=True
    ).stdout.strip()


def exit_status(pid: int, dead_status: str) -> int:
    """The exit status of a pane's exited process: tmux's, once it reaped it; else the zombie's own (proc(5),
    field 52 of /proc/PID/stat, in waitpid's form)."""
    if dead_status:
        return int(dead_status)
    with open(f"/proc/{pid}/stat", "rb") as f:
        fields = f.read().rsplit(b")", 1)[1].split()
    assert fields[0] == b"Z", f"pane process {pid} is {fields[0]!r}, neither reaped nor a zombie"
    return os.waitstatus_to_exitcode(int(fields[49]))


def test_top_runs_in_a_real_terminal_and_q_quits(workspace, broker, monkeypatch):  # type: ignore[no-untyped-def]
    """The full-screen app in a tmux pane (a real terminal): it draws the sessions and the broker's state, q ends it."""
    for key, value in {**broker.env(), **FAST}.items():
        monkeypatch.setenv(key, value)
    create_demo("quiet")
    viewer = private_tmux()
    try:
        screen = start_top(viewer, keep_dead=True)

        wait_for(lambda: "quiet" in screen() and "broker up" in screen(), timeout=90, message=lambda: screen())
        assert "could not read" not in screen()
        pane_pid = int(tmux_format(viewer.name, "#{pane_pid}"))
        subprocess.run(["tmux", "-L", viewer.name, "send-keys", "-t", "v", "q"], check=True)
        # Judged from the process, not tmux's "Pane is dead" line: on a loaded machine tmux can leave the
        # exited process a zombie (unreaped, so no status line) for over a minute after the pane's pty closed.
        wait_for(
            lambda: tmux_format(viewer.name, "#{pane_dead}") == "1",
            timeout=60,
            message=lambda: f"mam top did not exit on q: {screen()}",
        )
        assert exit_status(pane_pid, tmux_format(viewer.name, "#{pane_dead_status}")) == 0, screen()
    finally:
        viewer.kill()


def test_top_shows_the_broker_going_away_and_keeps_reading(workspace, own_broker, monkeypatch):  # type: ignore[no-untyped-def]
    from textual.widgets import DataTable, Static

    from mam.settings import load_settings
    from mam.view.top import TopApp

    b = own_broker("amqtt")
    for key, value in {**b.env(), **FAST}.items():
        monkeypatch.setenv(key, value)
    create_demo("quiet")
    app = TopApp(workspace, load_settings(env_file=workspace.env_file))

    async def drive() -> str:
        async with app.run_test(size=(160, 40)) as pilot:

            async def until(check, what: str) -> None:  # type: ignore[no-untyped-def]
                for _ in range(600):
                    if check():
                        return
                    await pilot.pause(0.05)
                raise AssertionError(f"never: {what}")

            await until(lambda: app.broker == "up", "the broker up")
            b.stop()
            await until(lambda: app.broker == "down", "the broker seen gone")
            create_demo("later")  # the registry is still read
            app.reload()
            sessions = app.query_one("#sessions", DataTable)
            await until(lambda: sessions.row_count == 2, "the new session shown")
            return str(app.query_one("#head", Static).render())

    head = asyncio.run(drive())
    assert "broker DOWN" in head


def test_at_80_columns_the_message_column_stays_and_the_cancel_question_is_whole(busy_workspace):  # type: ignore[no-untyped-def]
    from textual.geometry import Region
    from textual.widgets import DataTable, Label

    from mam.settings import load_settings
    from mam.view.top import Confirm, TopApp

    ws, jobs = busy_workspace
    app = TopApp(ws, load_settings(env_file=ws.env_file))

    async def drive() -> tuple[list[str], str, str]:
        async with app.run_test(size=(80, 30)) as pilot:

            async def until(check, what: str) -> None:  # type: ignore[no-untyped-def]
                for _ in range(600):
                    if check():
                        return
                    await pilot.pause(0.05)
                raise AssertionError(f"never: {what}")

            table = app.query_one("#jobs", DataTable)
            await until(lambda: table.row_count == 2, "2 open jobs")
            await until(
                lambda: "working" in str(table.get_row(jobs["busy"])[-1]), "busy's progress message in the table"
            )
            await pilot.pause(0.2)
            shown = [str(c) for c in table.get_row(jobs["busy"])]
            assert table.virtual_size.width <= table.size.width, "the jobs table scrolls sideways at 80 columns"
            table.focus()
            keys = [str(table.coordinate_to_cell_key((r, 0)).row_key.value) for r in range(table.row_count)]
            table.move_cursor(row=keys.index(jobs["busy"]))
            await pilot.press("c")
            await until(lambda: isinstance(app.screen, Confirm), "the confirmation")
            await pilot.pause(0.2)
            label = app.screen.query_one("#question", Label)
            lines = label.render_lines(Region(0, 0, label.size.width, label.size.height))
            text = " ".join(strip.text.strip() for strip in lines)
            assert label.region.right <= 80
            question = app.screen.question
            await pilot.press("n")
            return shown, text, question

    shown, text, question = asyncio.run(drive())
    message = shown[-1]
    assert message.startswith("working"), shown  # the MESSAGE column is there, not pushed off the screen
    assert sum(len(c) + 2 for c in shown) <= 80
    assert " ".join(text.split()) == " ".join(question.split()), (text, question)  # the whole question


def test_enter_attaches_and_detaching_comes_back_to_top(workspace, tmux_server, broker, monkeypatch):  # type: ignore[no-untyped-def]
    for key, value in {**broker.env(), **FAST}.items():
        monkeypatch.setenv(key, value)
    create_demo("quiet")
    viewer = private_tmux()
    try:
        screen = start_top(viewer)

        def clients() -> str:
            return subprocess.run(
                ["tmux", "-L", tmux_server.name, "list-clients"], capture_output=True, text=True
            ).stdout.strip()

        wait_for(lambda: "quiet" in screen() and "SESSIONS" in screen(), timeout=90, message=lambda: screen())
        subprocess.run(["tmux", "-L", viewer.name, "send-keys", "-t", "v", "Enter"], check=True)
        wait_for(lambda: clients() != "", timeout=30, message=lambda: f"no client on the session's server: {screen()}")
        wait_for(lambda: "demo agent ready" in screen(), timeout=30, message=lambda: screen())
        subprocess.run(["tmux", "-L", viewer.name, "send-keys", "-t", "v", "C-b", "d"], check=True)
        wait_for(lambda: clients() == "", timeout=30, message="the client never detached")
        wait_for(lambda: "SESSIONS" in screen() and "quiet" in screen(), timeout=30, message=lambda: screen())
        assert tmux_format(viewer.name, "#{pane_dead}") == "0"  # top itself is still the pane's program
    finally:
        viewer.kill()


def start_top(viewer: Any, *, keep_dead: bool = False) -> Callable[[], str]:
    """`mam top` in a 160x40 pane of the private tmux server `viewer` (the test's broker and workspace
    settings passed on); returns a reader of its screen. keep_dead: the pane stays when top exits."""
    env = [f"{k}={v}" for k, v in os.environ.items() if k.startswith(("MQTT_", "MAM_", "PATH", "HOME"))]
    tmux = ["tmux", "-L", viewer.name]
    subprocess.run([*tmux, "new-session", "-d", "-x", "160", "-y", "40", "-s", "v"], check=True)
    if keep_dead:
        subprocess.run([*tmux, "set-option", "-g", "remain-on-exit", "on"], check=True)
    subprocess.run([*tmux, "respawn-pane", "-k", "-t", "v", "env", *env, "TERM=xterm-256color", MAM, "top"], check=True)

    def screen() -> str:
        return subprocess.run([*tmux, "capture-pane", "-p", "-t", "v"], capture_output=True, text=True).stdout

    return screen


def test_h_shows_the_hosts_and_enter_on_one_shows_its_sessions_and_jobs(workspace, mosquitto_broker, monkeypatch):  # type: ignore[no-untyped-def]
    """A real named node of this workspace announces itself on the broker; top's HOSTS (hidden until `h`)
    lists it from its signed presence, arrows + Enter pick it and show its sessions and open jobs."""
    import uuid

    from textual.widgets import DataTable, Static

    from mam.settings import load_settings
    from mam.view.top import TopApp

    for key, value in {**mosquitto_broker.env(), **FAST, "MAM_DISPATCH_SECRET": "top-fleet-secret"}.items():
        monkeypatch.setenv(key, value)
    create_demo("quiet")
    name = f"top-{uuid.uuid4().hex[:6]}"
    node = spawn_mam("node", "--name", name, "--allow-insecure-broker")
    app = TopApp(workspace, load_settings(env_file=workspace.env_file))

    async def drive() -> tuple[list[str], str]:
        async with app.run_test(size=(160, 50)) as pilot:

            async def until(check, what: str) -> None:  # type: ignore[no-untyped-def]
                for _ in range(1200):
                    if check():
                        return
                    await pilot.pause(0.05)
                raise AssertionError(f"never: {what}")

            hosts = app.query_one("#hosts", DataTable)
            sessions = app.query_one("#sessions", DataTable)
            detail = app.query_one("#host-detail", Static)
            await until(lambda: app.broker == "up" and sessions.row_count == 1, "the broker up and the session")
            assert not hosts.display  # hidden until asked for
            await pilot.press("h")
            assert hosts.display and app.focused is hosts

            def keys() -> list[str]:
                return [str(hosts.coordinate_to_cell_key((r, 0)).row_key.value) for r in range(hosts.row_count)]

            await until(lambda: name in keys(), f"node {name} in the HOSTS")
            await pilot.press("home")
            for _ in range(keys().index(name)):
                await pilot.press("down")
            await pilot.press("enter")
            await until(lambda: "quiet running" in str(detail.render()), "the picked host's sessions")
            shown = [str(c) for c in hosts.get_row(name)]
            text = str(detail.render())
            await pilot.press("h")
            await until(lambda: not hosts.display, "the HOSTS hidden again")
            assert app.focused is sessions and app.return_value is None  # Enter on a host attached nothing
            return shown, text

    try:
        shown, text = asyncio.run(drive())
    finally:
        node.terminate()
        try:
            node.wait(timeout=30)
        except subprocess.TimeoutExpired:
            node.kill()
            node.wait()
    assert shown[0] == name and shown[2] == "online" and shown[5] == "1/1", shown
    assert text.startswith(f"{name} (") and "sessions: quiet running" in text and "open jobs: none" in text, text


def test_messages_that_land_after_the_widgets_went_show_nothing_and_raise_nothing(workspace):  # type: ignore[no-untyped-def]
    """Seen at the end of a CI run: the broker's thread posted a node's presence as top was leaving, and showing
    it met a screen without its tables (NoMatches '#hosts'). A snapshot, the broker's state, a host and the
    clock's tick that come then are dropped."""
    from mam.remote.fleet import FleetTable
    from mam.settings import load_settings
    from mam.view.model import snapshot
    from mam.view.top import BrokerChanged, FleetMoved, Loaded, TopApp

    settings = load_settings(env_file=workspace.env_file)
    app = TopApp(workspace, settings, follow_broker=False)
    snap = snapshot(workspace, settings, broker="up")

    async def drive() -> None:
        async with app.run_test(size=(120, 40)) as pilot:
            app.fleet = FleetTable("a-secret")
            await pilot.press("h")  # the HOSTS shown: a presence would fill them
            await app.query_one("#head").screen.remove_children()
            for message in (Loaded(snap), BrokerChanged("down"), FleetMoved()):
                app.post_message(message)
            app._tick()
            await pilot.pause(0.2)
            assert app.broker == "down" and app.snap is snap  # taken, not shown

    asyncio.run(drive())


def test_an_embedded_broker_not_started_is_not_running_not_down(workspace, monkeypatch):  # type: ignore[no-untyped-def]
    """Seen in the README walk: before the first job, `mam top --snapshot` said `broker DOWN` of the embedded
    broker that simply had not been started (nothing was wrong); it must also not start one."""
    for key in [k for k in os.environ if k.startswith("MQTT_") or k == "MAM_BROKER_PORT"]:
        monkeypatch.delenv(key)
    (workspace.root / ".mam.env").write_text("")
    proc = mam("top", "--snapshot", "--width", "120", check=True)
    head = proc.stdout.splitlines()[0]
    assert "broker not running (the next job starts it)" in head and "DOWN" not in head, head
    assert not (workspace.root / ".mam" / "broker" / "broker.pid").exists()
