"""mam.agents.opencode_server against a stand-in for opencode's server on loopback: the channel file,
the launch options, and what each answer of the server means for the paste (the real opencode:
tests/real/test_opencode.py)."""

from __future__ import annotations

import base64
import json
import os
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from mam.agents import opencode_server as ocs
from mam.agents.channel import Outcome, Sent


class StandIn:
    """Answers like opencode 1.18.33 (basic auth, /session, /tui/select-session, prompt_async), or as told:
    `prompt_status` for the prompt, `drop_prompt` to close the connection without an answer."""

    def __init__(self, password: str) -> None:
        self.password = password
        self.calls: list[tuple[str, str, Any]] = []
        self.prompt_status = 204
        self.drop_prompt = False
        owner = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:
                pass

            def do_POST(self) -> None:  # noqa: N802
                body = json.loads(self.rfile.read(int(self.headers.get("Content-Length") or 0)) or b"null")
                want = "Basic " + base64.b64encode(f"opencode:{owner.password}".encode()).decode()
                if self.headers.get("Authorization") != want:
                    return self._answer(401, b"Unauthorized")
                owner.calls.append(("POST", self.path, body))
                if self.path == "/session":
                    return self._answer(200, json.dumps({"id": "ses_new1"}).encode())
                if self.path == "/tui/select-session":
                    return self._answer(200, b"true")
                if self.path.endswith("/prompt_async"):
                    if owner.drop_prompt:
                        self.close_connection = True
                        self.connection.shutdown(2)
                        return None
                    return self._answer(owner.prompt_status, b"")
                return self._answer(404, b"")

            def _answer(self, status: int, data: bytes) -> None:
                self.send_response(status)
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.port = int(self.httpd.server_address[1])
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()

    def prompts(self) -> list[Any]:
        return [body for _m, path, body in self.calls if path.endswith("/prompt_async")]


@pytest.fixture
def server() -> Iterator[StandIn]:
    s = StandIn("s3cret")
    yield s
    s.httpd.shutdown()
    s.httpd.server_close()


def test_each_launch_gets_a_private_file_with_a_new_port_and_secret(tmp_path: Path) -> None:
    first = ocs.open_channel(tmp_path / "sessions" / "a")
    path = tmp_path / "sessions" / "a" / ocs.CHANNEL_FILE
    assert path.stat().st_mode & 0o777 == 0o600
    assert ocs.read_channel(tmp_path / "sessions" / "a") == first
    again = ocs.open_channel(tmp_path / "sessions" / "a")
    assert again.password != first.password and ocs.read_channel(tmp_path / "sessions" / "a") == again
    args, env = ocs.launch_options(again)
    assert args == ("--port", str(again.port), "--hostname", "127.0.0.1", "--mdns=false")
    assert again.password not in args and env["OPENCODE_SERVER_PASSWORD"] == again.password


def test_a_channel_file_others_may_read_is_not_used(tmp_path: Path) -> None:
    ocs.open_channel(tmp_path)
    os.chmod(tmp_path / ocs.CHANNEL_FILE, 0o644)
    assert ocs.read_channel(tmp_path) is None
    assert ocs.read_channel(tmp_path / "none") is None


def test_a_fresh_tui_gets_a_session_shown_then_the_prompt(server: StandIn) -> None:
    out = ocs.deliver(ocs.Channel(server.port, "s3cret"), "the brief", None)
    assert out == Outcome(Sent.DELIVERED, "", "ses_new1")
    assert [path for _m, path, _b in server.calls] == [
        "/session",
        "/tui/select-session",
        "/session/ses_new1/prompt_async",
    ]
    assert server.calls[1][2] == {"sessionID": "ses_new1"}
    assert server.prompts() == [{"parts": [{"type": "text", "text": "the brief"}]}]


def test_a_known_conversation_is_shown_and_prompted(server: StandIn) -> None:
    out = ocs.deliver(ocs.Channel(server.port, "s3cret"), "b", "ses_old")
    assert out.sent is Sent.DELIVERED and out.conversation_id == "ses_old"
    assert [path for _m, path, _b in server.calls] == ["/tui/select-session", "/session/ses_old/prompt_async"]


def test_a_wrong_secret_or_no_server_takes_nothing(server: StandIn) -> None:
    wrong = ocs.deliver(ocs.Channel(server.port, "guess"), "b", "ses_old")
    assert wrong.sent is Sent.UNAVAILABLE and "401" in wrong.why and server.calls == []
    closed = ocs.Channel(ocs.free_port(), "s3cret")
    assert ocs.deliver(closed, "b", "ses_old").sent is Sent.UNAVAILABLE


def test_a_refused_prompt_is_unavailable_but_a_lost_answer_or_a_server_error_is_unknown(server: StandIn) -> None:
    channel = ocs.Channel(server.port, "s3cret")
    server.prompt_status = 404
    assert ocs.deliver(channel, "b", "ses_old").sent is Sent.UNAVAILABLE
    server.prompt_status = 500
    assert ocs.deliver(channel, "b", "ses_old").sent is Sent.UNKNOWN
    server.drop_prompt = True
    assert ocs.deliver(channel, "b", "ses_old").sent is Sent.UNKNOWN
