"""opencode's own server as a delivery channel: a job's brief becomes a turn started through the HTTP
API of the opencode TUI in the session's pane, instead of a paste.

The opencode TUI (checked with 1.18.33) is a client of its own server; `--port N` makes that server
listen on N (`--hostname`, default 127.0.0.1), and with OPENCODE_SERVER_PASSWORD set every route
answers 401 without HTTP basic auth (user OPENCODE_SERVER_USERNAME, default "opencode").
`POST /session/{id}/prompt_async` starts a turn in that session (204, the turn runs on), and
`POST /tui/select-session` makes the TUI show that session: the person in the pane sees the brief
and the reply as if it had been typed.

Each launch gets a free loopback port and a fresh secret, kept in the session's 0600 file
`.mam/sessions/<name>/opencode-server.json` (never on a command line: the secret reaches opencode
through the pane's environment, which the launcher takes from a 0600 spec file).
"""

from __future__ import annotations

import base64
import contextlib
import http.client
import json
import os
import secrets
import socket
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import quote

from mam.agents.channel import NoAnswer, Outcome, Refused
from mam.agents.channel import deliver as deliver_in
from mam.util.fs import atomic_write_json

CHANNEL_FILE = "opencode-server.json"
HOST = "127.0.0.1"
USERNAME = "opencode"
# Each request's answer: 10 s once ran out on a loaded 2-core machine (selecting the session, right after the
# TUI's start), and the brief was pasted instead; a refused connection still fails at once.
TIMEOUT_S = 30.0


@dataclass(frozen=True)
class Channel:
    port: int
    password: str
    username: str = USERNAME


def free_port() -> int:
    """A loopback port nobody listens on now (opencode binds it a moment later)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((HOST, 0))
        return int(s.getsockname()[1])


def open_channel(state_dir: Path) -> Channel:
    """A new port and secret for one launch, written to the session's 0600 channel file."""
    channel = Channel(port=free_port(), password=secrets.token_urlsafe(32))
    atomic_write_json(
        state_dir / CHANNEL_FILE,
        {"host": HOST, "port": channel.port, "username": channel.username, "password": channel.password},
        mode=0o600,
    )
    return channel


def launch_options(channel: Channel) -> tuple[tuple[str, ...], dict[str, str]]:
    """The TUI's args (loopback only, no mDNS whatever the user's config says) and env (the secret)."""
    args = ("--port", str(channel.port), "--hostname", HOST, "--mdns=false")
    return args, {"OPENCODE_SERVER_PASSWORD": channel.password, "OPENCODE_SERVER_USERNAME": channel.username}


def read_channel(state_dir: Path) -> Channel | None:
    """The channel of the session's current launch, or None (a session launched without one, or a
    file not private to this user)."""
    path = state_dir / CHANNEL_FILE
    try:
        st = path.stat()
        if st.st_uid != os.getuid() or st.st_mode & 0o077:
            return None
        data = json.loads(path.read_text(encoding="utf-8"))
        return Channel(port=int(data["port"]), password=str(data["password"]), username=str(data["username"]))
    except (OSError, ValueError, KeyError, TypeError):
        return None


def _call(channel: Channel, method: str, path: str, body: Any | None) -> Any:
    auth = base64.b64encode(f"{channel.username}:{channel.password}".encode()).decode()
    headers = {"Authorization": f"Basic {auth}", "Accept": "application/json"}
    data = None if body is None else json.dumps(body).encode("utf-8")
    if data is not None:
        headers["Content-Type"] = "application/json"
    conn = http.client.HTTPConnection(HOST, channel.port, timeout=TIMEOUT_S)
    try:
        try:
            conn.connect()
        except OSError as e:
            raise Refused(f"opencode's server on {HOST}:{channel.port} is not reachable: {e}") from None
        try:
            conn.request(method, path, body=data, headers=headers)
            resp = conn.getresponse()
            payload = resp.read()
        except (OSError, http.client.HTTPException) as e:
            raise NoAnswer(f"no answer from opencode's server to {method} {path.split('?')[0]}: {e}") from None
        if resp.status >= 500:  # it may have failed half-way through
            raise NoAnswer(f"opencode's server answered {resp.status} to {method} {path.split('?')[0]}")
        if resp.status // 100 != 2:
            raise Refused(f"opencode's server answered {resp.status} to {method} {path.split('?')[0]}")
        return json.loads(payload) if payload.strip() else None
    finally:
        with contextlib.suppress(OSError):
            conn.close()


def deliver(channel: Channel, text: str, conversation_id: str | None) -> Outcome:
    """Start a turn holding `text` in the session `conversation_id` (a new one when None, as a paste
    into a fresh TUI would), shown in the TUI first (mam.agents.channel: what each answer means)."""

    def find() -> str:
        found = conversation_id
        if not found:
            made = _call(channel, "POST", "/session", {})
            found = str((made or {}).get("id") or "")
            if not found.startswith("ses_"):
                raise Refused(f"opencode's server made no session: {made!r}")
        _call(channel, "POST", "/tui/select-session", {"sessionID": found})
        return found

    def start(found: str) -> None:
        _call(
            channel,
            "POST",
            f"/session/{quote(found, safe='')}/prompt_async",
            {"parts": [{"type": "text", "text": text}]},
        )

    return deliver_in(find, start)
