"""The scripted Anthropic server itself (no CLI needed): the stream it sends and the script's plan."""

from __future__ import annotations

import json
import urllib.request
from typing import Any

from mam.jobs.brief import with_footer
from tests.real.anthropic_server import AnthropicServer, FooterScript, footer_commands


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
