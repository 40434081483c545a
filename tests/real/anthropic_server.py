"""A scripted stand-in for the Anthropic Messages API, for driving the real Claude Code CLI.

Claude Code (with `ANTHROPIC_BASE_URL=http://127.0.0.1:PORT`) calls only
`POST /v1/messages?beta=true`, streamed as server-sent events: `message_start`, `ping`, per
content block `content_block_start` / `content_block_delta` (`text_delta` or `input_json_delta`)
/ `content_block_stop`, then `message_delta` (stop_reason, usage) and `message_stop`. Its shell
tool is `Bash` with `{"command": ...}`; results come back in the next request as `tool_result`
blocks. The message list may end with `role: system` entries: the last user turn is found by
skipping them.

A *script* decides every reply from the request body (see `FooterScript`). The server records
each request and the usage it reported, so a test can check what the CLI sent (the brief once,
the earlier turns after a resume). `server.hold_reply(after_started)` holds back the reply to the
request that follows the footer's `started` (tests/real/_http.py `Hold`), so a turn is in progress
for as long as a test needs. Standard library only; bound to 127.0.0.1 on a port the OS
picks; stopped by its own handle.
"""

from __future__ import annotations

import json
import re
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from tests.real._http import LoopbackServer, QuietHandler, sse_event

# -- what a reply is made of ---------------------------------------------------------------------


@dataclass(frozen=True)
class Text:
    text: str


@dataclass(frozen=True)
class ToolUse:
    name: str
    input: dict[str, Any]
    id: str = field(default_factory=lambda: f"toolu_{uuid.uuid4().hex[:24]}")


Block = Text | ToolUse
Script = Callable[[dict[str, Any]], list[Block]]


# -- reading a request ---------------------------------------------------------------------------


def text_of(content: Any) -> str:
    """All text in a message's content (a string, or a list of blocks, tool results included)."""
    if isinstance(content, str):
        return content
    parts: list[str] = []
    for block in content or []:
        if not isinstance(block, dict):
            continue
        if block.get("type") == "text":
            parts.append(str(block.get("text", "")))
        elif block.get("type") == "tool_result":
            parts.append(text_of(block.get("content")))
    return "\n".join(parts)


def conversation(body: dict[str, Any]) -> list[dict[str, Any]]:
    """The user/assistant turns of a request, without the trailing `role: system` entries."""
    return [m for m in body.get("messages", []) if m.get("role") in ("user", "assistant")]


def last_user_turn(body: dict[str, Any]) -> dict[str, Any] | None:
    for message in reversed(conversation(body)):
        if message.get("role") == "user":
            return message
    return None


def tool_names(body: dict[str, Any]) -> list[str]:
    return [str(t.get("name")) for t in body.get("tools") or [] if isinstance(t, dict)]


def is_main_turn(body: dict[str, Any]) -> bool:
    """A request of the agent's main loop (it offers the Bash tool), not a side query (titles...)."""
    return "Bash" in tool_names(body)


def tool_uses(message: dict[str, Any]) -> list[dict[str, Any]]:
    content = message.get("content")
    if not isinstance(content, list):
        return []
    return [b for b in content if isinstance(b, dict) and b.get("type") == "tool_use"]


# -- the default script: run the footer's commands ---------------------------------------------

# One `mam event ...` command as the footer prints it: from "mam event" to the end of the line.
FOOTER_COMMAND = re.compile(r"(?m)(?:^|(?<=\s))(mam event (?P<kind>[a-z]+) --job \S+[^\n]*?)\s*$")


def footer_commands(text: str, kinds: tuple[str, ...] = ("started", "progress", "completed")) -> list[str]:
    """The footer's commands of these kinds, in the order given by `kinds`, each exactly as printed."""
    found: dict[str, str] = {}
    for match in FOOTER_COMMAND.finditer(text):
        kind = match.group("kind")
        if kind in kinds and kind not in found:
            found[kind] = match.group(1)
    return [found[k] for k in kinds if k in found]


def footer_turn(
    body: dict[str, Any], kinds: tuple[str, ...] = ("started", "progress", "completed")
) -> tuple[list[str], int] | None:
    """(the footer's commands, tool calls made since) for the latest user turn holding a footer; None if none."""
    turns = conversation(body)
    for index in range(len(turns) - 1, -1, -1):
        if turns[index].get("role") != "user":
            continue
        commands = footer_commands(text_of(turns[index].get("content")), kinds)
        if commands:
            return commands, sum(len(tool_uses(m)) for m in turns[index + 1 :] if m.get("role") == "assistant")
    return None


def after_started(body: dict[str, Any]) -> bool:
    """The main-loop request that follows the footer's `started` (its result is in): a hold point."""
    found = footer_turn(body) if is_main_turn(body) else None
    return found is not None and found[1] == 1


@dataclass
class FooterScript:
    """Answer a brief by running its footer's commands one by one through `Bash`, then a final text.

    Stateless: it finds the latest user turn that holds a footer, counts the tool calls already
    made after it, and asks for the next command. `before` commands (e.g. one that no allow rule
    covers) are asked for first. A side query (no Bash tool offered) gets a short text.
    """

    kinds: tuple[str, ...] = ("started", "progress", "completed")
    before: tuple[str, ...] = ()
    final_text: str = "All done: the job is reported."

    def __call__(self, body: dict[str, Any]) -> list[Block]:
        if not is_main_turn(body):
            return [Text("Scripted title")]
        found = footer_turn(body, self.kinds)
        if found is not None:
            commands, done = found
            plan = [*self.before, *commands]
            if done < len(plan):
                command = plan[done]
                return [
                    Text(f"Running step {done + 1}."),
                    ToolUse("Bash", {"command": command, "description": f"step {done + 1}"}),
                ]
            return [Text(self.final_text)]
        last = last_user_turn(body)
        return [Text(f"Noted ({len(text_of(last.get('content')) if last else '')} characters); nothing to run.")]


# -- the server ----------------------------------------------------------------------------------


@dataclass
class Request:
    path: str
    body: dict[str, Any]
    reply: list[Block]
    usage: dict[str, int]
    message_id: str = ""  # the id the reply's message carried (the CLI records it with the usage)
    given_up: bool = False  # held back (`server.hold_reply`) and never answered: the CLI gave the request up

    @property
    def main(self) -> bool:
        return is_main_turn(self.body)


class AnthropicServer(LoopbackServer[Request]):
    """`with AnthropicServer(script) as server:` ... `server.base_url`, `server.requests`."""

    thread_name = "anthropic-server"

    def __init__(self, script: Script | None = None) -> None:
        super().__init__()
        self.script: Script = script or FooterScript()
        self.other: list[tuple[str, str]] = []  # (method, path) of anything that is not /v1/messages

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def main_requests(self) -> list[Request]:
        return [r for r in self.snapshot() if r.main]

    def usage_sent(self) -> dict[str, dict[str, int]]:
        """The usage reported with each reply, by message id."""
        return {r.message_id: dict(r.usage) for r in self.snapshot()}

    def reset(self, script: Script | None = None) -> None:
        """Forget what was recorded (and optionally change the script) between scenarios."""
        with self._lock:
            self.requests.clear()
            self.other.clear()
            if script is not None:
                self.script = script

    def _other(self, method: str, path: str) -> None:
        with self._lock:
            self.other.append((method, path))

    def _handler_class(self) -> type[_Handler]:
        return _Handler


NOT_SCRIPTED = {"type": "error", "error": {"type": "not_found_error", "message": "not scripted"}}


class _Handler(QuietHandler):
    server_owner: AnthropicServer

    def do_GET(self) -> None:  # noqa: N802 - http.server's naming
        self.server_owner._other("GET", self.path)
        self._json(404, NOT_SCRIPTED)

    def do_HEAD(self) -> None:  # noqa: N802
        self.server_owner._other("HEAD", self.path)
        self.send_response(200)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def do_POST(self) -> None:  # noqa: N802
        server = self.server_owner
        raw = self._body()
        if self.path.split("?")[0] != "/v1/messages":
            server._other("POST", self.path)
            self._json(404, NOT_SCRIPTED)
            return
        try:
            body = json.loads(raw or b"{}")
        except ValueError:
            self._json(400, {"type": "error", "error": {"type": "invalid_request_error", "message": "bad JSON"}})
            return
        if server._held(body, self.connection) is False:
            server._record(Request(self.path, body, [], {}, given_up=True))
            self.close_connection = True
            return
        try:
            reply = server.script(body)
        except Exception as e:  # a broken script must show up in the test, not hang the CLI
            reply = [Text(f"script error: {type(e).__name__}: {e}")]
        usage = {
            "input_tokens": 10 + len(json.dumps(body.get("messages", []))) // 40,
            "output_tokens": 5
            + sum(len(json.dumps(b.input)) if isinstance(b, ToolUse) else len(b.text) for b in reply) // 4,
            "cache_creation_input_tokens": 0,
            "cache_read_input_tokens": 0,
        }
        message_id = f"msg_{uuid.uuid4().hex[:24]}"
        server._record(Request(self.path, body, reply, usage, message_id))
        model = str(body.get("model") or "claude-scripted")
        if body.get("stream"):
            self._sse(sse_event(event, data) for event, data in stream_events(message_id, model, reply, usage))
        else:
            self._json(200, message_json(message_id, model, reply, usage))


def stop_reason(reply: list[Block]) -> str:
    return "tool_use" if any(isinstance(b, ToolUse) for b in reply) else "end_turn"


def message_json(message_id: str, model: str, reply: list[Block], usage: dict[str, int]) -> dict[str, Any]:
    content: list[dict[str, Any]] = []
    for block in reply:
        if isinstance(block, Text):
            content.append({"type": "text", "text": block.text})
        else:
            content.append({"type": "tool_use", "id": block.id, "name": block.name, "input": block.input})
    return {
        "id": message_id,
        "type": "message",
        "role": "assistant",
        "model": model,
        "content": content,
        "stop_reason": stop_reason(reply),
        "stop_sequence": None,
        "usage": usage,
    }


def stream_events(
    message_id: str, model: str, reply: list[Block], usage: dict[str, int]
) -> list[tuple[str, dict[str, Any]]]:
    """The server-sent events of one streamed reply, in the order the Messages API sends them."""
    start_usage = {**usage, "output_tokens": 1}
    message = {
        "id": message_id,
        "type": "message",
        "role": "assistant",
        "model": model,
        "content": [],
        "stop_reason": None,
        "stop_sequence": None,
        "usage": start_usage,
    }
    events: list[tuple[str, dict[str, Any]]] = [
        ("message_start", {"type": "message_start", "message": message}),
        ("ping", {"type": "ping"}),
    ]
    for index, block in enumerate(reply):
        if isinstance(block, Text):
            events.append(
                (
                    "content_block_start",
                    {"type": "content_block_start", "index": index, "content_block": {"type": "text", "text": ""}},
                )
            )
            events.append(
                (
                    "content_block_delta",
                    {
                        "type": "content_block_delta",
                        "index": index,
                        "delta": {"type": "text_delta", "text": block.text},
                    },
                )
            )
        else:
            events.append(
                (
                    "content_block_start",
                    {
                        "type": "content_block_start",
                        "index": index,
                        "content_block": {"type": "tool_use", "id": block.id, "name": block.name, "input": {}},
                    },
                )
            )
            events.append(
                (
                    "content_block_delta",
                    {
                        "type": "content_block_delta",
                        "index": index,
                        "delta": {"type": "input_json_delta", "partial_json": json.dumps(block.input)},
                    },
                )
            )
        events.append(("content_block_stop", {"type": "content_block_stop", "index": index}))
    events.append(
        (
            "message_delta",
            {
                "type": "message_delta",
                "delta": {"stop_reason": stop_reason(reply), "stop_sequence": None},
                "usage": {"output_tokens": usage["output_tokens"]},
            },
        )
    )
    events.append(("message_stop", {"type": "message_stop"}))
    return events
