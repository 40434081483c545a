"""The scripted Anthropic server itself (no CLI needed): the stream it sends and the script's plan."""

from __future__ import annotations

import json
import socket
import time
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest

from mam.jobs.brief import with_footer
from mam.util.poll import wait_for
from tests.real.anthropic_server import AnthropicServer, FooterScript, after_started, footer_commands


def post(server: AnthropicServer, body: dict[str, Any]) -> list[tuple[str, dict[str, Any]]]:
    req = urllib.request.Request(
        f"{server.base_url}/v1/messages?beta=true",
        data=json.dumps(body).encode(),
        headers={"Content-Type": "application/json"},
        method="POST",
    )
    with urllib.request.urlopen(req, timeout=10) as resp:
        text = resp.read().decode()
    events = []
    for chunk in text.strip().split("\n\n"):
        lines = dict(line.split(": ", 1) for line in chunk.splitlines())
        events.append((lines["event"], json.loads(lines["data"])))
    return events


def reply_blocks(events: list[tuple[str, dict[str, Any]]]) -> list[dict[str, Any]]:
    """Fold the stream back into content blocks, as a client does."""
    blocks: dict[int, dict[str, Any]] = {}
    partial: dict[int, str] = {}
    for name, data in events:
        if name == "content_block_start":
            blocks[data["index"]] = dict(data["content_block"])
        elif name == "content_block_delta":
            delta = data["delta"]
            if delta["type"] == "text_delta":
                blocks[data["index"]]["text"] += delta["text"]
            else:
                partial[data["index"]] = partial.get(data["index"], "") + delta["partial_json"]
        elif name == "content_block_stop" and data["index"] in partial:
            blocks[data["index"]]["input"] = json.loads(partial[data["index"]])
    return [blocks[i] for i in sorted(blocks)]


BASH_TOOL = [{"name": "Bash", "input_schema": {"type": "object"}}]


def test_footer_commands_are_the_lines_of_the_real_footer_as_printed() -> None:
    text = with_footer("Do it.", "job-1234abcd", "n0nce", 30)
    commands = footer_commands(text)
    assert [c.split()[2] for c in commands] == ["started", "progress", "completed"]
    for command in commands:
        assert any(line.strip() == command for line in text.splitlines()), command


def test_a_brief_is_answered_with_one_bash_call_per_footer_command_then_text() -> None:
    brief = with_footer("Do it.", "job-1234abcd", "n0nce", 30)
    messages: list[dict[str, Any]] = [
        {"role": "user", "content": [{"type": "text", "text": f'<pasted_content id="x">\n{brief}\n</pasted_content>'}]},
        {"role": "system", "content": "trailing entries are skipped"},
    ]
    with AnthropicServer(FooterScript()) as server:
        ran = []
        for _ in range(4):
            events = post(server, {"model": "m", "stream": True, "tools": BASH_TOOL, "messages": messages})
            names = [n for n, _ in events]
            assert names[:2] == ["message_start", "ping"] and names[-2:] == ["message_delta", "message_stop"]
            blocks = reply_blocks(events)
            tool = [b for b in blocks if b["type"] == "tool_use"]
            stop = events[-2][1]["delta"]["stop_reason"]
            if not tool:
                assert stop == "end_turn"
                break
            assert stop == "tool_use" and tool[0]["name"] == "Bash"
            ran.append(tool[0]["input"]["command"])
            messages = [m for m in messages if m["role"] != "system"]
            messages += [
                {"role": "assistant", "content": blocks},
                {"role": "user", "content": [{"type": "tool_result", "tool_use_id": tool[0]["id"], "content": "ok"}]},
            ]
        assert ran == footer_commands(brief)
        assert len(server.main_requests()) == 4 and all(r.usage["input_tokens"] > 0 for r in server.requests)


def test_a_side_query_without_the_bash_tool_gets_text_and_is_not_a_main_turn() -> None:
    with AnthropicServer() as server:
        events = post(server, {"model": "m", "stream": True, "messages": [{"role": "user", "content": "title?"}]})
        assert [b["type"] for b in reply_blocks(events)] == ["text"]
        assert server.requests and not server.main_requests()


def after_started_body() -> dict[str, Any]:
    """A main-loop request whose `started` already ran: the one `after_started` picks."""
    brief = with_footer("Do it.", "job-1234abcd", "n0nce", 30)
    call = {"type": "tool_use", "id": "t1", "name": "Bash", "input": {"command": footer_commands(brief)[0]}}
    return {
        "model": "m",
        "stream": True,
        "tools": BASH_TOOL,
        "messages": [
            {"role": "user", "content": brief},
            {"role": "assistant", "content": [call]},
            {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t1", "content": "ok"}]},
        ],
    }


def test_a_held_reply_goes_out_on_release_and_only_the_first_matching_request_is_held() -> None:
    with AnthropicServer() as server, ThreadPoolExecutor(2) as pool:
        hold = server.hold_reply(after_started)
        body = after_started_body()
        first = pool.submit(post, server, body)
        assert hold.reached.wait(10) and not first.done()
        assert "progress" in reply_blocks(post(server, body))[1]["input"]["command"]  # the next one is not held
        hold.release()
        assert "progress" in reply_blocks(first.result(10))[1]["input"]["command"]
        assert hold.outcome == "released"


def test_a_held_request_the_client_gives_up_is_never_answered() -> None:
    with AnthropicServer() as server:
        hold = server.hold_reply(after_started)
        data = json.dumps(after_started_body()).encode()
        with socket.create_connection(("127.0.0.1", server.port), timeout=10) as conn:
            head = f"POST /v1/messages HTTP/1.1\r\nHost: x\r\nContent-Length: {len(data)}\r\n\r\n"
            conn.sendall(head.encode() + data)
            assert hold.reached.wait(10)
        wait_for(lambda: hold.outcome == "abandoned", timeout=10)
        wait_for(lambda: [r.given_up for r in server.main_requests()] == [True], timeout=10)


def test_stopping_the_server_lets_a_held_request_go() -> None:
    server = AnthropicServer().start()
    hold = server.hold_reply(after_started)
    with ThreadPoolExecutor(1) as pool:
        pending = pool.submit(post, server, after_started_body())
        assert hold.reached.wait(10)
        started = time.monotonic()
        server.stop()
        with pytest.raises(OSError):  # the connection is closed unanswered
            pending.result(10)
    assert hold.outcome == "closed" and time.monotonic() - started < 5
