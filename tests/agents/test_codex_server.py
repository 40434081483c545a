"""mam.agents.codex_server against a stand-in for codex's app-server (JSON-RPC over a WebSocket on a
unix socket): which thread a brief goes to, what each answer means for the paste, the launch's argv
split between the app-server and the TUI, and the app-server's lifetime tied to the pane's process
(the real codex: tests/real/test_codex_channel.py)."""

from __future__ import annotations

import dataclasses
import json
import os
import shutil
import signal
import socket
import struct
import subprocess
import sys
import tempfile
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from mam.agents import codex_server as cxs
from mam.agents.base import LaunchContext, SessionOptions
from mam.agents.channel import Outcome, Sent
from mam.jobs.delivery import PaneDelivery
from mam.jobs.target import parse_target
from mam.store.sessions import SessionRow
from mam.util import websocket
from mam.util.poll import wait_for
from mam.util.proc import module_argv
from mam.workspace import Workspace

THREAD = "01a24af7-dd6a-7d21-88b4-44afae73b582"


def thread(tid: str, cwd: str, **more: Any) -> dict[str, Any]:
    return {"id": tid, "cwd": cwd, "source": "vscode", "parentThreadId": None, **more}


class StandIn:
    """Answers like codex 0.171.0's app-server (initialize, thread/loaded/list, thread/read, turn/start,
    with notifications and a ping in between), or as told: `turn` is "ok", "error", "drop" (close
    without an answer) or "silent" (never answer); `http` answers the handshake with a plain HTTP error."""

    def __init__(self, path: Path, threads: list[dict[str, Any]]) -> None:
        self.path, self.threads = path, threads
        self.turn, self.http = "ok", False
        self.calls: list[tuple[str, Any]] = []
        # As codex does: the socket in a short private folder, `path` a symlink to it (a deep workspace's
        # path would not fit in a unix socket's address).
        self.real = Path(tempfile.mkdtemp(prefix="cxs-", dir="/tmp")) / "s"
        self.server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.server.bind(str(self.real))
        self.server.listen(8)
        path.symlink_to(self.real)
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self) -> None:
        while True:
            try:
                conn, _ = self.server.accept()
            except OSError:
                return
            threading.Thread(target=self._client, args=(conn,), daemon=True).start()

    def _client(self, conn: socket.socket) -> None:
        with conn:
            buf = b""
            while b"\r\n\r\n" not in buf:
                buf += conn.recv(4096)
            head = buf.decode("latin-1")
            if self.http:
                conn.sendall(b"HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\n\r\n")
                return
            key = next(line.split(":", 1)[1].strip() for line in head.split("\r\n") if line.lower().startswith("sec-"))
            conn.sendall(
                b"HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
                + f"Sec-WebSocket-Accept: {websocket.accept_key(key)}\r\n\r\n".encode()
            )
            reader = conn.makefile("rb")
            try:
                while self._answer(conn, reader):
                    pass
            except (OSError, struct.error, ValueError):
                return

    def _answer(self, conn: socket.socket, reader: Any) -> bool:
        opcode, payload = read_frame(reader)
        if opcode == 0x8:
            return False
        if opcode != 0x1:
            return True
        msg = json.loads(payload)
        self.calls.append((msg["method"], msg.get("params")))
        if "id" not in msg:
            return True
        method, ask = msg["method"], msg["id"]
        send(conn, {"method": "configWarning", "params": {"summary": "noise before the answer"}})
        conn.sendall(bytes([0x89, 0]))  # a ping: the client answers it and reads on
        if method == "initialize":
            return send(conn, {"id": ask, "result": {"userAgent": "stand-in"}})
        if method == "thread/loaded/list":
            return send(conn, {"id": ask, "result": {"data": [t["id"] for t in self.threads], "nextCursor": None}})
        if method == "thread/read":
            found = next(t for t in self.threads if t["id"] == msg["params"]["threadId"])
            return send(conn, {"id": ask, "result": {"thread": found}})
        if method == "turn/start":
            if self.turn == "error":
                return send(conn, {"id": ask, "error": {"code": -32600, "message": "thread not found"}})
            if self.turn == "drop":
                conn.shutdown(socket.SHUT_RDWR)
                return False
            if self.turn == "silent":
                return True
            return send(conn, {"id": ask, "result": {"turn": {"id": "turn-1", "status": "inProgress"}}})
        return send(conn, {"id": ask, "error": {"code": -32601, "message": "no such method"}})

    def turns(self) -> list[Any]:
        return [params for method, params in self.calls if method == "turn/start"]

    def close(self) -> None:
        self.server.close()
        shutil.rmtree(self.real.parent, ignore_errors=True)


def read_frame(reader: Any) -> tuple[int, bytes]:
    b0, b1 = reader.read(2)
    n = b1 & 0x7F
    if n == 126:
        (n,) = struct.unpack("!H", reader.read(2))
    elif n == 127:
        (n,) = struct.unpack("!Q", reader.read(8))
    assert b1 & 0x80, "a client's frame is always masked"
    key = reader.read(4)
    data = reader.read(n)
    return b0 & 0x0F, bytes(c ^ key[i % 4] for i, c in enumerate(data))


def send(conn: socket.socket, message: dict[str, Any]) -> bool:
    data = json.dumps(message).encode()
    head = bytes([0x81, len(data)]) if len(data) < 126 else bytes([0x81, 126]) + struct.pack("!H", len(data))
    conn.sendall(head + data)
    return True


@pytest.fixture
def state(tmp_path: Path) -> Path:
    folder = tmp_path / "s" / cxs.CHANNEL_DIR
    folder.mkdir(parents=True, mode=0o700)
    return tmp_path / "s"


@pytest.fixture
def server(state: Path, tmp_path: Path) -> Iterator[StandIn]:
    s = StandIn(state / cxs.CHANNEL_DIR / cxs.SOCKET, [thread(THREAD, str(tmp_path))])
    os.chmod(s.path, 0o600)
    yield s
    s.close()


def test_a_known_thread_that_is_loaded_gets_the_turn(server: StandIn, state: Path, tmp_path: Path) -> None:
    out = cxs.deliver(state, "the brief", THREAD, str(tmp_path))
    assert out == Outcome(Sent.DELIVERED, "", THREAD)
    assert [m for m, _p in server.calls] == ["initialize", "initialized", "thread/loaded/list", "turn/start"]
    assert server.turns() == [{"threadId": THREAD, "input": [{"type": "text", "text": "the brief"}]}]


def test_without_a_known_id_the_one_thread_of_the_folder_is_found(server: StandIn, state: Path, tmp_path: Path) -> None:
    server.threads = [
        thread("sub", str(tmp_path), parentThreadId=THREAD, source={"subAgent": {"thread_spawn": {}}}),
        thread("elsewhere", "/somewhere/else"),
        *server.threads,
    ]
    out = cxs.deliver(state, "b", None, str(tmp_path))
    assert out == Outcome(Sent.DELIVERED, "", THREAD) and server.turns()[0]["threadId"] == THREAD


def test_no_exact_thread_means_nothing_is_sent(server: StandIn, state: Path, tmp_path: Path) -> None:
    server.threads.append(thread("second", str(tmp_path)))  # two threads of the folder: which one is shown?
    two = cxs.deliver(state, "b", None, str(tmp_path))
    assert two.sent is Sent.UNAVAILABLE and "2 threads" in two.why
    unloaded = cxs.deliver(state, "b", "another-thread", str(tmp_path))
    assert unloaded.sent is Sent.UNAVAILABLE and "not loaded" in unloaded.why
    assert server.turns() == []


def test_a_large_brief_goes_in_one_message(server: StandIn, state: Path, tmp_path: Path) -> None:
    brief = "x" * 70000  # past 65535 bytes: the 64-bit length form
    assert cxs.deliver(state, brief, THREAD, str(tmp_path)).sent is Sent.DELIVERED
    assert server.turns()[0]["input"][0]["text"] == brief


def test_a_refused_turn_is_unavailable_but_a_lost_answer_is_unknown(
    server: StandIn, state: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    server.turn = "error"
    assert cxs.deliver(state, "b", THREAD, str(tmp_path)).sent is Sent.UNAVAILABLE
    server.turn = "drop"
    assert cxs.deliver(state, "b", THREAD, str(tmp_path)).sent is Sent.UNKNOWN
    monkeypatch.setattr(cxs, "TIMEOUT_S", 0.5)
    server.turn = "silent"
    out = cxs.deliver(state, "b", THREAD, str(tmp_path))
    assert out.sent is Sent.UNKNOWN and "no answer" in out.why
    assert len(server.turns()) == 3


def test_no_server_a_stranger_or_a_shared_socket_takes_nothing(server: StandIn, state: Path, tmp_path: Path) -> None:
    assert cxs.deliver(tmp_path / "never-launched", "b", THREAD, str(tmp_path)) is None  # no channel: paste
    server.http = True
    assert cxs.deliver(state, "b", THREAD, str(tmp_path)).sent is Sent.UNAVAILABLE
    server.http = False
    os.chmod(server.path, 0o666)
    assert "not private" in cxs.deliver(state, "b", THREAD, str(tmp_path)).why
    server.close()  # the socket gone, the symlink left dangling (a crashed server)
    assert cxs.deliver(state, "b", THREAD, str(tmp_path)).sent is Sent.UNAVAILABLE
    server.path.unlink()
    assert cxs.deliver(state, "b", THREAD, str(tmp_path)).sent is Sent.UNAVAILABLE
    assert server.turns() == []


def test_the_launch_is_split_between_the_app_server_and_the_tui(tmp_path: Path) -> None:
    sock = tmp_path / "app.sock"
    argv = ["codex", "resume", THREAD, "--no-daemon", "-c", "notify=[1]", "--full", "--enable", "x", "-c", "a=b"]
    server, tui = cxs.split_argv(argv, sock)
    assert server == ["codex", "app-server", "--listen", f"unix://{sock}", "-c", "notify=[1]", "--enable", "x"] + [
        "-c",
        "a=b",
    ]
    assert tui == ["codex", "resume", THREAD, "--remote", f"unix://{sock}", "--full"]
    ctx = LaunchContext(session="s", cwd=str(tmp_path), state_dir=tmp_path / "st")
    options = cxs.with_channel(SessionOptions(args=("--no-daemon",), env={"A": "1"}), ctx)
    assert options.args == ("--no-daemon",) and options.env == {"A": "1"}  # as without a channel: the wrap splits
    assert options.wrap[-3:] == (
        cxs.__name__,
        str(ctx.state_dir / cxs.CHANNEL_DIR / cxs.SOCKET),
        str(ctx.state_dir / cxs.CHANNEL_DIR / cxs.LOG),
    )
    assert (ctx.state_dir / cxs.CHANNEL_DIR).stat().st_mode & 0o777 == 0o700


FAKE_CODEX = """#!{python}
import os, signal, socket, sys
if sys.argv[1:2] == ["app-server"]:
    if os.environ.get("NO_SERVER"):
        sys.exit(3)
    s = socket.socket(socket.AF_UNIX)
    s.bind(sys.argv[3][len("unix://"):])
    s.listen(1)
    open(os.environ["PIDS"] + ".server", "w").write(str(os.getpid()))
    signal.pause()  # until killed
open(os.environ["PIDS"] + ".tui", "w").write(repr(sys.argv[1:]))
signal.pause()
"""


def run_wrapped(tmp_path: Path, **env: str) -> subprocess.Popen[bytes]:
    fake = tmp_path / "codex"
    fake.write_text(FAKE_CODEX.format(python=sys.executable))
    fake.chmod(0o700)
    folder = tmp_path / cxs.CHANNEL_DIR
    folder.mkdir(mode=0o700)
    argv = [str(fake), "--no-daemon", "-c", "a=b"]
    wrap = module_argv(sys.executable, cxs.__name__, str(folder / cxs.SOCKET), str(folder / cxs.LOG))
    return subprocess.Popen([*wrap, *argv], env={**os.environ, "PIDS": str(tmp_path / "pid"), **env})


def test_the_app_server_starts_before_the_tui_and_dies_with_it(tmp_path: Path) -> None:
    pane = run_wrapped(tmp_path)
    try:
        tui = wait_for(lambda: (tmp_path / "pid.tui").exists() and (tmp_path / "pid.tui").read_text(), timeout=30)
        sock = tmp_path / cxs.CHANNEL_DIR / cxs.SOCKET
        assert tui == repr(["--remote", f"unix://{sock}"])  # the same process now runs the TUI
        server = int((tmp_path / "pid.server").read_text())
        assert Path(f"/proc/{server}/status").read_text().count(f"PPid:\t{pane.pid}\n") == 1
    finally:
        pane.send_signal(signal.SIGKILL)  # no handler of the pane's runs: only the kernel's death signal
        pane.wait()
    wait_for(
        lambda: not Path(f"/proc/{server}").exists() or "State:\tZ" in Path(f"/proc/{server}/status").read_text(),
        timeout=10,
    )


def test_without_an_app_server_the_tui_starts_as_before(tmp_path: Path) -> None:
    pane = run_wrapped(tmp_path, NO_SERVER="1")
    try:
        tui = wait_for(lambda: (tmp_path / "pid.tui").exists() and (tmp_path / "pid.tui").read_text(), timeout=30)
        assert tui == repr(["--no-daemon", "-c", "a=b"])  # the argv it had without a channel, in its order
    finally:
        pane.kill()
        pane.wait()


def test_a_deep_workspace_reaches_the_socket_through_codexs_symlink(tmp_path: Path) -> None:
    state = tmp_path / ("deep" * 30) / "s"  # the symlink's own path is too long for a unix socket address
    (state / cxs.CHANNEL_DIR).mkdir(parents=True, mode=0o700)
    server = StandIn(state / cxs.CHANNEL_DIR / cxs.SOCKET, [thread(THREAD, str(tmp_path))])
    try:
        os.chmod(server.path, 0o600)
        assert len(str(server.path)) > 108
        assert cxs.deliver(state, "b", THREAD, str(tmp_path)).sent is Sent.DELIVERED
    finally:
        server.close()


class Notes:
    """The job's ledger as the delivery uses it: its audit notes."""

    def __init__(self) -> None:
        self.lines: list[tuple[str, dict[str, Any]]] = []

    def note(self, kind: str, **fields: Any) -> None:
        self.lines.append((kind, fields))


class Rows:
    """The registry as the delivery uses it here: a session's row, updated."""

    def __init__(self, row: SessionRow) -> None:
        self.row = row

    def update_session(self, name: str, **changes: Any) -> SessionRow:
        self.row = dataclasses.replace(self.row, **changes)
        return self.row


@pytest.mark.parametrize(
    ("answer", "via", "noted"),
    [
        ("ok", "channel", []),
        ("error", "", ["channel_unavailable"]),  # refused: nothing taken, the paste goes ahead
        ("drop", "channel", ["channel_no_answer"]),  # maybe taken: never pasted after it
        ("gone", "", ["channel_unavailable"]),
    ],
)
def test_the_delivery_pastes_only_when_the_channel_took_nothing(
    answer: str, via: str, noted: list[str], tmp_path: Path
) -> None:
    ws = Workspace(tmp_path / "ws")
    folder = ws.session_dir("s") / cxs.CHANNEL_DIR
    folder.mkdir(parents=True, mode=0o700)
    server = StandIn(folder / cxs.SOCKET, [thread(THREAD, str(tmp_path))])
    try:
        os.chmod(server.path, 0o600)
        server.turn = answer
        if answer == "gone":
            server.close()
        row = SessionRow(name="s", agent="codex", role="dev", backend="tmux", server="x", cwd=str(tmp_path))
        rows = Rows(row)
        delivery = PaneDelivery(parse_target("tmux:s"), ws=ws, settings=None, registry=rows)  # type: ignore[arg-type]
        delivery.row = row
        notes = Notes()
        assert delivery._through_channel("the brief", notes) == via  # type: ignore[arg-type]
        assert [kind for kind, _f in notes.lines] == noted
        assert len(server.turns()) == (0 if answer == "gone" else 1)
        # the thread found becomes the session's conversation id (mam learns it before codex's rollout exists)
        assert rows.row.conversation_id == (THREAD if via else None)
    finally:
        server.close()
