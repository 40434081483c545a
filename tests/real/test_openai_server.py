"""The scripted OpenAI-style server on its own (no CLI needed): it reads mam's real footer, and
its two streams have the shapes Codex 0.171 and opencode 1.18 were seen to accept."""

from __future__ import annotations

import json
import socket
import urllib.request
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest

from mam.jobs.brief import with_footer
from mam.util.poll import wait_for
from tests.real.openai_server import FINAL_TEXT, ScriptedModel, after_started, script_for


@pytest.fixture
def model() -> Iterator[ScriptedModel]:
    with ScriptedModel() as m:
        yield m


def post(model: ScriptedModel, path: str, body: dict[str, Any]) -> list[str]:
    req = urllib.request.Request(
        f"{model.base_url}{path}", data=json.dumps(body).encode(), headers={"Content-Type": "application/json"}
    )
    with urllib.request.urlopen(req, timeout=10) as resp:
        assert resp.headers["Content-Type"] == "text/event-stream"
        return [line[len("data: ") :] for line in resp.read().decode().splitlines() if line.startswith("data: ")]


def brief() -> str:
    return with_footer("Fix the typo.", "job-abc123", "n0nce", 30)


def test_the_script_is_the_real_footers_commands_in_order() -> None:
    steps = script_for(brief())
    assert [s.command.split()[:3] for s in steps] == [["mam", "event", x] for x in ("started", "progress", "completed")]
    footer_lines = [line.strip() for line in brief().splitlines()]
    # Each command is a footer line's text from `mam` to the end, exactly as printed.
    assert all(any(line.endswith(s.command) for line in footer_lines) for s in steps)
    assert "--job job-abc123 --nonce n0nce --heartbeat 30" in steps[0].command


def test_run_lines_go_between_started_and_progress() -> None:
    text = with_footer("Do it.\nRUN: echo one\nRUN-ESCALATED: touch /tmp/x", "job-1", "nn", 5)
    steps = script_for(text)
    assert [(s.command, s.escalate) for s in steps[1:3]] == [("echo one", False), ("touch /tmp/x", True)]
    assert steps[0].command.startswith("mam event started") and steps[-1].command.startswith("mam event completed")


def test_a_no_report_line_runs_started_and_the_run_lines_only() -> None:
    text = with_footer("Do it.\nRUN: echo one\nNO-REPORT", "job-1", "nn", 5)
    steps = script_for(text)
    assert [s.command.split()[:3] for s in steps] == [["mam", "event", "started"], ["echo", "one"]]
    reminder = 'mam job job-1 is still open.\n  mam event completed --job job-1 --message "x"\n'
    assert script_for(reminder) == []  # no `started` in it: the model answers with a text


def responses_body(items: list[dict[str, Any]], **extra: Any) -> dict[str, Any]:
    tools = [
        {
            "type": "function",
            "name": "exec_command",
            "parameters": {"type": "object", "properties": {"cmd": {"type": "string"}}},
        }
    ]
    return {"model": "m", "stream": True, "tools": tools, "input": items, **extra}


def test_responses_stream_asks_for_each_command_then_answers(model: ScriptedModel) -> None:
    user = {"type": "message", "role": "user", "content": [{"type": "input_text", "text": brief()}]}
    context = {
        "type": "message",
        "role": "user",
        "content": [{"type": "input_text", "text": "<environment_context>x</environment_context>"}],
    }
    items: list[dict[str, Any]] = [context, user]
    ran = []
    for _ in range(3):
        events = [json.loads(d) for d in post(model, "/responses", responses_body(items))]
        assert [e["type"] for e in events] == [
            "response.created",
            "response.output_item.added",
            "response.function_call_arguments.delta",
            "response.function_call_arguments.done",
            "response.output_item.done",
            "response.completed",
        ]
        call = events[4]["item"]
        assert call["type"] == "function_call" and call["name"] == "exec_command"
        ran.append(json.loads(call["arguments"])["cmd"])
        assert events[-1]["response"]["usage"]["output_tokens"] > 0
        items += [call, {"type": "function_call_output", "call_id": call["call_id"], "output": "ok"}]
    assert [c.split()[2] for c in ran] == ["started", "progress", "completed"]
    events = [json.loads(d) for d in post(model, "/responses", responses_body(items))]
    assert events[-2]["item"]["content"][0]["text"] == FINAL_TEXT
    assert [r.reply for r in model.snapshot()] == ["tool", "tool", "tool", "text"]
    assert model.usage_total()["input_tokens"] == sum(r.usage["input_tokens"] for r in model.snapshot())


def test_a_title_side_query_gets_json_that_fits_its_schema(model: ScriptedModel) -> None:
    schema = {"type": "object", "properties": {"title": {"type": "string"}}, "required": ["title"]}
    body = responses_body(
        [{"type": "message", "role": "user", "content": [{"type": "input_text", "text": brief()}]}],
        text={"format": {"type": "json_schema", "schema": schema, "name": "t"}},
    )
    body["tools"] = []
    events = [json.loads(d) for d in post(model, "/responses", body)]
    text = events[-2]["item"]["content"][0]["text"]
    assert set(json.loads(text)) == {"title"}
    assert model.snapshot()[0].reply == "side" and model.commands_run() == []


def test_chat_stream_has_tool_call_deltas_usage_and_done(model: ScriptedModel) -> None:
    tools = [
        {
            "type": "function",
            "function": {
                "name": "bash",
                "parameters": {
                    "type": "object",
                    "properties": {"command": {}, "description": {}},
                    "required": ["command", "description"],
                },
            },
        }
    ]
    body = {
        "model": "m",
        "stream": True,
        "stream_options": {"include_usage": True},
        "tools": tools,
        "messages": [
            {"role": "system", "content": "s"},
            {"role": "user", "content": [{"type": "text", "text": brief()}]},
        ],
    }
    data = post(model, "/chat/completions", body)
    assert data[-1] == "[DONE]"
    chunks = [json.loads(d) for d in data[:-1]]
    assert chunks[-1]["choices"] == [] and chunks[-1]["usage"]["completion_tokens"] > 0
    args = "".join(
        c["choices"][0]["delta"].get("tool_calls", [{}])[0].get("function", {}).get("arguments", "")
        for c in chunks[:-1]
    )
    assert json.loads(args)["command"].startswith("mam event started") and json.loads(args)["description"]
    assert [c["choices"][0]["finish_reason"] for c in chunks[:-1]][-1] == "tool_calls"
    body["messages"] += [
        {"role": "assistant", "tool_calls": []},
        {"role": "tool", "tool_call_id": "call_1", "content": "ok"},
    ]
    second = [json.loads(d) for d in post(model, "/chat/completions", body)[:-1]]
    args = "".join(
        c["choices"][0]["delta"].get("tool_calls", [{}])[0].get("function", {}).get("arguments", "")
        for c in second[:-1]
    )
    assert json.loads(args)["command"].startswith("mam event progress")


def test_a_chat_request_without_stream_gets_one_json_completion(model: ScriptedModel) -> None:
    body = {"model": "m", "messages": [{"role": "user", "content": "Name this conversation."}]}
    req = urllib.request.Request(
        f"{model.base_url}/chat/completions",
        data=json.dumps(body).encode(),
        headers={"Content-Type": "application/json"},
    )
    with urllib.request.urlopen(req, timeout=10) as resp:
        answer = json.loads(resp.read())
    assert answer["object"] == "chat.completion" and answer["choices"][0]["message"]["content"]
    assert answer["usage"]["prompt_tokens"] > 0 and model.snapshot()[0].reply == "side"


@pytest.mark.parametrize("tool", ["bash", "terminal", "run_terminal_command"])
def test_the_shell_tool_of_each_chat_cli_gets_the_command(tool: str) -> None:
    from tests.real.openai_server import Step, shell_call

    tools = [
        {"type": "function", "function": {"name": "read"}},
        {"type": "function", "function": {"name": tool, "parameters": {"required": ["command"]}}},
    ]
    assert shell_call(tools, Step("mam event started --job j")) == (tool, {"command": "mam event started --job j"})


def test_a_held_responses_reply_goes_out_on_release_or_never_if_the_client_gives_it_up(model: ScriptedModel) -> None:
    started = script_for(brief())[0].command
    items = [
        {"type": "message", "role": "user", "content": [{"type": "input_text", "text": brief()}]},
        {"type": "function_call", "call_id": "c1", "name": "exec_command", "arguments": json.dumps({"cmd": started})},
        {"type": "function_call_output", "call_id": "c1", "output": "ok"},
    ]
    body = responses_body(items)
    assert after_started(body) and not after_started(responses_body(items[:1]))
    hold = model.hold_reply(after_started)
    with ThreadPoolExecutor(1) as pool:
        pending = pool.submit(post, model, "/v1/responses", body)
        assert hold.reached.wait(10) and not pending.done()
        hold.release()
        assert "progress" in "".join(pending.result(10))
    given_up = model.hold_reply(after_started)
    data = json.dumps(body).encode()
    with socket.create_connection(("127.0.0.1", model.port), timeout=10) as conn:
        conn.sendall(f"POST /v1/responses HTTP/1.1\r\nHost: x\r\nContent-Length: {len(data)}\r\n\r\n".encode() + data)
        assert given_up.reached.wait(10)
    wait_for(lambda: model.snapshot()[-1].reply == "given up", timeout=10)
    assert given_up.outcome == "abandoned"
