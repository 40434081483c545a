"""The node's control-mode client of a tmux server (mam.panes.tmux_control), against a real tmux.

The backend contract runs through it too (tests/panes/test_backend_contract.py, harness `tmux-control`);
these are what only it can get wrong: that the routed calls start no tmux process, that a screen showing
control-mode lines cannot cut an answer short, that a client that died is replaced and a command it had
been given is never written again, and that nothing is left when the node ends.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from mam.panes import tmux as tmux_module
from mam.panes import tmux_control
from mam.panes.tmux import TmuxBackend
from mam.panes.tmux import socket_path as tmux_socket
from mam.workspace import Workspace
from tests.panes.conftest import PASTE_CAPTURE, processes_mentioning, settings

ENV = {"PATH": os.environ["PATH"], "LANG": "C.UTF-8"}


@pytest.fixture
def control(workspace: Workspace) -> Iterator[Path]:
    folder = workspace.run_dir / "tmux"
    tmux_control.serve(folder)
    try:
        yield folder
    finally:
        tmux_control.close_all()


def clients_of(socket: Path) -> set[int]:
    return {pid for pid in processes_mentioning(str(socket)) if b"-C\0attach-session" in _cmdline(pid)}


def _cmdline(pid: int) -> bytes:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return b""


def no_processes(monkeypatch: pytest.MonkeyPatch) -> None:
    """From here on, any tmux command run as a process fails the test."""

    def refuse(argv, *args, **kwargs):  # noqa: ANN001, ANN002, ANN003
        raise AssertionError(f"a process was started: {argv}")

    monkeypatch.setattr(subprocess, "run", refuse)


def test_the_calls_of_a_delivery_start_no_tmux_process(
    workspace: Workspace, tmux_server, control: Path, tmp_path: Path, poll, monkeypatch: pytest.MonkeyPatch
) -> None:
    backend = TmuxBackend(tmux_server.name, settings=settings(), ws=workspace)
    out = tmp_path / "pasted.bin"
    info = backend.create_pane(
        name="c", argv=[sys.executable, str(PASTE_CAPTURE), str(out)], cwd=str(tmp_path), env=ENV
    )
    poll(lambda: "READY" in backend.capture(info.pane_id), timeout=20, message=lambda: backend.capture(info.pane_id))
    no_processes(monkeypatch)

    looked = backend.pane(info.pane_id)
    assert looked is not None and looked.pid == info.pid and not looked.dead
    assert backend.pane("%999") is None
    brief = "a brief with 'quotes', \"doubles\", $HOME, #{pane_id}, ; and \\ \n" * 400
    screen = backend.paste_and_capture(info.pane_id, brief)
    assert "READY" in screen
    poll(out.exists, timeout=30, message="the paste never ended")
    assert out.read_bytes() == brief.encode()
    backend.send_keys(info.pane_id, "Enter")
    poll(lambda: Path(f"{out}.after").exists() and Path(f"{out}.after").read_bytes() == b"\r", timeout=10)
    assert list(control.iterdir()) == []  # the paste's file is gone once tmux read it
    assert oct(control.stat().st_mode & 0o777) == "0o700"
    assert len(clients_of(tmux_socket(tmux_server.name))) == 1


def test_the_monitors_looks_start_no_tmux_process_and_answer_as_a_process_would(
    workspace: Workspace, tmux_server, control: Path, tmp_path: Path, poll, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The node's monitor lists the sessions and the panes every few seconds: through the control client too."""
    backend = TmuxBackend(tmux_server.name, settings=settings(), ws=workspace)
    for name in ("m1", "m2"):
        argv = [sys.executable, str(PASTE_CAPTURE), str(tmp_path / name)]
        backend.create_pane(name=name, argv=argv, cwd=str(tmp_path), env=ENV)
    tmux_control.close_all()  # off: each look a process
    as_processes = (backend.server_running(), sorted(backend.panes(), key=lambda p: p.pane_id))
    tmux_control.serve(control)
    backend.capture(as_processes[1][0].pane_id)  # the control client starts
    no_processes(monkeypatch)
    assert (backend.server_running(), sorted(backend.panes(), key=lambda p: p.pane_id)) == as_processes
    assert as_processes[0] and len(as_processes[1]) >= 2


def current_block(socket: Path) -> tuple[int, int]:
    """(time, command number) of a command run now on the server, read by a control client of the test's."""
    done = subprocess.run(
        ["tmux", "-S", str(socket), "-C", "attach-session", "-t", "=mam", "-f", "no-output,ignore-size"],
        input=b"display-message -p x\n",
        capture_output=True,
        timeout=10,
    )
    begins = [line.split() for line in done.stdout.splitlines() if line.startswith(b"%begin ")]
    return int(begins[-1][1]), int(begins[-1][2])


def test_a_screen_showing_control_lines_cannot_cut_an_answer_short(
    workspace: Workspace, tmux_server, control: Path, tmp_path: Path, poll
) -> None:
    backend = TmuxBackend(tmux_server.name, settings=settings(), ws=workspace)
    info = backend.create_pane(name="f", argv=["sleep", "600"], cwd=str(tmp_path), env=ENV)
    socket = tmux_socket(tmux_server.name)
    when, number = current_block(socket)
    # What a guessing agent could print: the end (or error) of each of the next blocks, and a new block.
    lines = [
        f"%{kind} {t} {n} 1" for n in range(number, number + 40) for t in (when, when + 1) for kind in ("end", "error")
    ]
    lines += [f"%begin {when} {number + 1} 1", "mam-0123", "tail"]
    forged = tmp_path / "forged.txt"
    forged.write_text("\n".join(lines) + "\n")
    script = f"import signal,sys; sys.stdout.write(open({str(forged)!r}).read()); sys.stdout.flush(); signal.pause()"
    info = backend.create_pane(name="g", argv=[sys.executable, "-c", script], cwd=str(tmp_path), env=ENV)
    poll(lambda: "tail" in backend.capture(info.pane_id, lines=400), timeout=20)
    for _ in range(5):
        screen = backend.capture(info.pane_id, lines=400)
        assert [line for line in screen.splitlines() if line] == lines
        looked = backend.pane(info.pane_id)
        assert looked is not None and looked.pane_id == info.pane_id


def test_a_client_that_died_is_replaced_and_its_command_is_not_written_again(
    workspace: Workspace, tmux_server, control: Path, tmp_path: Path, poll, monkeypatch: pytest.MonkeyPatch
) -> None:
    backend = TmuxBackend(tmux_server.name, settings=settings(), ws=workspace)
    info = backend.create_pane(name="d", argv=["sleep", "600"], cwd=str(tmp_path), env=ENV)
    socket = tmux_socket(tmux_server.name)
    assert backend.pane(info.pane_id) is not None
    (first,) = clients_of(socket)
    os.kill(first, signal.SIGKILL)
    poll(lambda: first not in clients_of(socket), timeout=10)
    no_processes(monkeypatch)
    assert backend.pane(info.pane_id) is not None  # a new client answers
    (second,) = clients_of(socket)
    assert second != first

    client = tmux_control._client(tmux_module._tmux(), str(socket))  # the live one
    assert client is not None
    os.kill(second, signal.SIGKILL)
    poll(lambda: not client.alive(), timeout=10)
    with pytest.raises(tmux_control.Gone):
        client.run(("send-keys", "-t", info.pane_id, "x"))
    monkeypatch.setattr(client, "alive", lambda: True)  # as if it died under the next call
    done = backend._exec("send-keys", "-t", info.pane_id, "x")
    assert done.returncode == 1 and b"tmux control client" in done.stderr  # failed, never typed as a process


def test_a_look_a_dying_client_did_not_answer_is_asked_again_as_a_process(
    workspace: Workspace, tmux_server, control: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    backend = TmuxBackend(tmux_server.name, settings=settings(), ws=workspace)
    info = backend.create_pane(name="l", argv=["sleep", "600"], cwd=str(tmp_path), env=ENV)
    assert backend.pane(info.pane_id) is not None
    client = tmux_control._client(tmux_module._tmux(), str(tmux_socket(tmux_server.name)))
    assert client is not None
    client.close()
    monkeypatch.setattr(client, "alive", lambda: True)
    started: list[list[str]] = []
    real_run = subprocess.run
    monkeypatch.setattr(subprocess, "run", lambda argv, **kw: started.append(argv) or real_run(argv, **kw))
    looked = backend.pane(info.pane_id)  # never "gone" because the client was
    assert looked is not None and looked.pid == info.pid
    assert [argv[3] for argv in started] == ["display-message"]


def test_looks_from_several_threads_at_once_each_get_their_own_answer(
    workspace: Workspace, tmux_server, tmp_path: Path
) -> None:
    """Two sessions' first jobs at once: each thread's first look starts or shares the one client. (Two
    clients attaching at once, one leaving at once, crashed tmux 3.3a's server; the attach's own block
    printed after a first answer was once taken for it, and a live pane for gone.)"""
    backend = TmuxBackend(tmux_server.name, settings=settings(), ws=workspace)
    panes = [backend.create_pane(name=n, argv=["sleep", "600"], cwd=str(tmp_path), env=ENV) for n in "ab"]
    for _ in range(15):
        tmux_control.serve(workspace.run_dir / "tmux")
        try:
            seen: dict[int, object] = {}
            threads = [
                threading.Thread(target=lambda k=k, seen=seen: seen.__setitem__(k, backend.pane(panes[k % 2].pane_id)))
                for k in range(4)
            ]
            for t in threads:
                t.start()
            for t in threads:
                t.join(30)
            assert {k: getattr(v, "pid", None) for k, v in seen.items()} == {k: panes[k % 2].pid for k in range(4)}
            assert len(clients_of(tmux_socket(tmux_server.name))) == 1
        finally:
            tmux_control.close_all()
    assert backend.server_running()


def test_a_client_for_a_server_that_is_gone_starts_none(tmux_server) -> None:
    """A server killed under the node (at a test's end, by `mam demo`) stays gone: the control client fails at once
    and starts no server (`attach-session` alone would start one; one such left a server and its client behind,
    each keeping the other alive, for the rest of a run)."""
    socket = tmux_socket(tmux_server.name)
    assert not tmux_server.running() and not socket.exists()
    program = shutil.which("tmux")
    assert program is not None
    with pytest.raises(OSError):
        tmux_control.Client(program, str(socket))
    assert not socket.exists() and not tmux_server.running()
    assert not clients_of(socket)


def test_nothing_is_left_when_the_node_ends(workspace: Workspace, tmux_server, tmp_path: Path) -> None:
    tmux_control.serve(workspace.run_dir / "tmux")
    backend = TmuxBackend(tmux_server.name, settings=settings(), ws=workspace)
    info = backend.create_pane(name="e", argv=["sleep", "600"], cwd=str(tmp_path), env=ENV)
    assert backend.pane(info.pane_id) is not None
    socket = tmux_socket(tmux_server.name)
    (pid,) = clients_of(socket)
    tmux_control.close_all()
    assert not os.path.exists(f"/proc/{pid}") or _zombie(pid) is False
    assert clients_of(socket) == set()
    assert not tmux_control.routable(("capture-pane", "-p"), None)  # off again: calls are processes


def _zombie(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().split(") ")[1].startswith("Z")
    except OSError:
        return False


def test_what_is_routed(workspace: Workspace) -> None:
    assert not tmux_control.routable(("capture-pane", "-p"), None)  # off: a short-lived process
    tmux_control.serve(workspace.run_dir / "tmux")
    try:
        assert tmux_control.routable(("capture-pane", "-p", "-t", "%1"), None)
        assert tmux_control.routable(("load-buffer", "-b", "b", "-", ";", "paste-buffer", "-b", "b"), b"x")
        assert not tmux_control.routable(("send-keys", "-l", "--", "it's"), None)  # a quote: a process
        assert not tmux_control.routable(("send-keys", "-l", "--", "a\nb"), None)
        assert not tmux_control.routable(("new-window", "-d"), None)  # makes things: a process
        assert not tmux_control.routable(("capture-pane", ";", "kill-server"), None)
        assert not tmux_control.routable(("send-keys", "x"), b"stdin")  # stdin only for a paste
    finally:
        tmux_control.close_all()
