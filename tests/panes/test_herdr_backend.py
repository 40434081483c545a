"""herdr-only behaviour: the protocol check, starting a server (the fake `herdr` executable), its config.

Servers started here are mam's own (`herdr --session NAME server`); each test stops what it started,
by server.stop and then, if needed, by the pid the fake server recorded.
"""

from __future__ import annotations

import os
import signal
import socket
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
import tomllib

from mam.errors import ConfigError, HerdrProtocolError, PaneError
from mam.panes.herdr import HerdrBackend, herdr_key
from mam.panes.herdr_client import HerdrClient
from mam.panes.herdr_config import session_config_path
from mam.util.proc import cmdline, pid_alive
from mam.workspace import Workspace
from tests.fakes.herdr_server import FakeHerdr
from tests.panes.conftest import fake_server_state, herdr_name, processes_mentioning, settings

USER_CONFIG = """\
onboarding = false

[theme]
name = "dracula"

[theme.custom]
accent = "#f5c2e7"

[keys]
prefix = "ctrl+a"

[[keys.command]]
key = "prefix+g"
type = "pane"
command = "lazygit --path 'x y'"

[session]
resume_agents_on_restore = true

[ui]
sidebar_width = 30
toast = { delivery = "off" }
"""


@pytest.fixture
def backend(workspace: Workspace, short_config_home: Path) -> HerdrBackend:
    return HerdrBackend(herdr_name(), settings=settings(), ws=workspace)


@pytest.fixture
def started(backend: HerdrBackend, herdr_on_path: Path, poll) -> Iterator[HerdrBackend]:
    """`backend`, with the guarantee that any server it started is gone after the test."""
    yield backend
    state_file = backend.socket_path.parent / "fake-server.json"
    pid = fake_server_state(backend.socket_path)["pid"] if state_file.exists() else None
    try:
        backend.kill_server()
    finally:
        if pid and pid_alive(pid) and "server" in cmdline(pid):
            os.kill(pid, signal.SIGKILL)  # by the pid it recorded; only if stopping failed


# -- protocol -----------------------------------------------------------------------------------
@pytest.mark.parametrize("protocol", [21, 99])
def test_unknown_protocol_is_refused_before_any_other_request(backend: HerdrBackend, protocol: int) -> None:
    fake = FakeHerdr(backend.socket_path, protocol=protocol, version="9.9.9").start()
    try:
        assert backend.server_running()  # a liveness probe, not a promise to talk
        for attempt in (
            backend.ensure_server,
            backend.panes,
            lambda: backend.pane("w1:p1"),
            lambda: backend.capture("w1:p1"),
            lambda: backend.create_pane(name="a", argv=["true"], cwd="/", env={}),
        ):
            with pytest.raises(HerdrProtocolError) as e:
                attempt()
            message = str(e.value)
            assert f"protocol {protocol}" in message and "9.9.9" in message
            assert "20 (herdr 0.8.2)" in message and "22 (herdr 0.9.x)" in message
        assert set(fake.calls) == {"ping"}
        assert not fake.panes
    finally:
        fake.stop()


@pytest.mark.parametrize("protocol", [20, 22])
def test_supported_protocols_are_accepted(backend: HerdrBackend, protocol: int) -> None:
    fake = FakeHerdr(backend.socket_path, protocol=protocol).start()
    try:
        backend.ensure_server()
        assert backend.panes() == []
        assert fake.calls[0] == "ping"
    finally:
        fake.stop()


def test_a_reply_that_is_not_herdr_json_is_a_protocol_error(tmp_path: Path) -> None:
    path = Path(f"/tmp/mamh-{os.getpid()}-{threading.get_ident()}.sock")
    listener = socket.socket(socket.AF_UNIX)
    listener.bind(str(path))
    listener.listen()

    def answer() -> None:
        conn, _ = listener.accept()
        with conn:
            conn.recv(65536)
            conn.sendall(b"hello, not json\n")

    thread = threading.Thread(target=answer, daemon=True)
    thread.start()
    try:
        with pytest.raises(HerdrProtocolError, match="not JSON"):
            HerdrClient(path, timeout=5).call("ping")
    finally:
        thread.join(5)
        listener.close()
        path.unlink(missing_ok=True)


def test_request_errors_carry_herdr_code(backend: HerdrBackend) -> None:
    fake = FakeHerdr(backend.socket_path).start()
    try:
        with pytest.raises(PaneError) as e:
            backend.send_keys("w7:p7", "Enter")
        assert e.value.code == "pane_not_found"
        assert "pane_not_found" in str(e.value)
    finally:
        fake.stop()


# -- starting a server ----------------------------------------------------------------------------
def test_autostart_runs_herdr_session_server_and_stops_it(started: HerdrBackend, tmp_path: Path, poll) -> None:
    backend = started
    assert not backend.server_running()
    backend.ensure_server()
    assert backend.server_running()
    state = fake_server_state(backend.socket_path)
    assert state["argv"][1:] == ["--session", backend.server, "server"]
    server_pid = state["pid"]
    assert cmdline(server_pid)[-3:] == ["--session", backend.server, "server"]

    out = tmp_path / "probe.txt"
    script = "import os,sys; open(sys.argv[1],'w').write(str(os.getpid())); sys.stdin.read()"
    info = backend.create_pane(
        name="a", argv=[sys.executable, "-c", script, str(out)], cwd=str(tmp_path), env={"PATH": "/usr/bin:/bin"}
    )
    poll(lambda: out.exists() and out.read_text(), timeout=20)
    assert info.pid == int(out.read_text())
    backend.ensure_server()  # running: nothing new
    assert fake_server_state(backend.socket_path)["pid"] == server_pid

    backend.kill_server()
    assert not backend.socket_path.exists()
    poll(lambda: not pid_alive(server_pid), timeout=10)
    poll(lambda: not pid_alive(info.pid), timeout=10)


def test_no_autostart_refuses_and_starts_nothing(
    backend: HerdrBackend, herdr_on_path: Path, workspace: Workspace
) -> None:
    refusing = HerdrBackend(backend.server, settings=settings(MAM_NO_AUTOSTART="1"), ws=workspace)
    for attempt in (refusing.ensure_server, lambda: refusing.create_pane(name="a", argv=["true"], cwd="/", env={})):
        with pytest.raises(PaneError, match="MAM_NO_AUTOSTART=1"):
            attempt()
    assert not refusing.socket_path.exists()
    assert not processes_mentioning(backend.server)


def test_autostart_refuses_an_unknown_protocol_and_stops_that_server(
    started: HerdrBackend,
    monkeypatch: pytest.MonkeyPatch,
    poll,
) -> None:
    monkeypatch.setenv("FAKE_HERDR_PROTOCOL", "21")
    with pytest.raises(HerdrProtocolError, match="protocol 21"):
        started.ensure_server()
    pid = fake_server_state(started.socket_path)["pid"]
    poll(lambda: not pid_alive(pid), timeout=10, message="mam left the refused server running")
    assert not started.socket_path.exists()


def test_missing_herdr_binary_is_a_clear_error(workspace: Workspace, short_config_home: Path) -> None:
    backend = HerdrBackend(herdr_name(), settings=settings(HERDR_BIN="/nonexistent/herdr"), ws=workspace)
    with pytest.raises(PaneError, match="HERDR_BIN"):
        backend.ensure_server()


def test_started_server_gets_users_config_with_resume_off(
    started: HerdrBackend, short_config_home: Path, workspace: Workspace
) -> None:
    user = short_config_home / "herdr" / "config.toml"
    user.parent.mkdir(parents=True)
    user.write_text(USER_CONFIG)
    started.ensure_server()

    written = session_config_path(workspace, started.server)
    merged = tomllib.loads(written.read_text())
    expected = tomllib.loads(USER_CONFIG)
    expected["session"]["resume_agents_on_restore"] = False
    assert merged == expected
    assert user.read_text() == USER_CONFIG  # the user's file is untouched
    assert written.is_relative_to(workspace.state)

    state = fake_server_state(started.socket_path)
    assert state["config_path"] == str(written)  # the server read mam's copy (HERDR_CONFIG_PATH)
    assert state["resume_agents_on_restore"] is False
    assert state["config"]["keys"]["prefix"] == "ctrl+a"


def test_unreadable_user_config_still_turns_resume_off(
    started: HerdrBackend, short_config_home: Path, workspace: Workspace, caplog: pytest.LogCaptureFixture
) -> None:
    user = short_config_home / "herdr" / "config.toml"
    user.parent.mkdir(parents=True)
    user.write_text("[session\nresume_agents_on_restore = true\n")
    with caplog.at_level("WARNING", logger="mam.panes.herdr_config"):
        started.ensure_server()
    assert "cannot read herdr config" in caplog.text
    assert tomllib.loads(session_config_path(workspace, started.server).read_text()) == {
        "session": {"resume_agents_on_restore": False}
    }
    assert fake_server_state(started.socket_path)["resume_agents_on_restore"] is False


# -- small pieces ----------------------------------------------------------------------------------
@pytest.mark.parametrize(
    "name, key",
    [
        ("Enter", "enter"),
        ("Escape", "esc"),
        ("Tab", "tab"),
        ("BTab", "shift+tab"),
        ("BSpace", "backspace"),
        ("C-c", "ctrl+c"),
        ("C-d", "ctrl+d"),
        ("M-x", "alt+x"),
        ("C-M-a", "ctrl+alt+a"),
        ("F5", "f5"),
        ("y", "y"),
        ("-", "minus"),
    ],
)
def test_key_names_map_to_herdr_combos(name: str, key: str) -> None:
    assert herdr_key(name) == key


def test_unknown_key_name_is_refused() -> None:
    with pytest.raises(PaneError, match="unknown key"):
        herdr_key("Hyper-Meta-Frobnicate")


@pytest.mark.parametrize("name", ["default", "a b", "", "x/y", "é"])
def test_invalid_session_names_are_refused(name: str, workspace: Workspace) -> None:
    with pytest.raises(ConfigError):
        HerdrBackend(name, settings=settings(), ws=workspace)
