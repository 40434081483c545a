"""The scripted Gemini API server on its own (no CLI needed): it reads mam's real footer, streams
the shapes gemini 0.61.0 was seen to accept, and answers its JSON side queries with JSON."""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from collections.abc import Iterator
from typing import Any

import pytest

from mam.jobs.brief import with_footer
from tests.real.gemini_server import SHELL_TOOL, GeminiModel, fill_schema, user_texts
from tests.real.openai_server import FINAL_TEXT

TOOLS = [
    {
        "functionDeclarations": [
            {"name": "read_file", "parametersJsonSchema": {}},
            {"name": SHELL_TOOL, "parametersJsonSchema": {}},
        ]
    }
]


@pytest.fixture
def model() -> Iterator[GeminiModel]:
    with GeminiModel() as m:
        yield m


def post(model: GeminiModel, method: str, body: dict[str, Any]) -> tuple[str, bytes]:
    url = f"{model.base_url}/v1beta/models/gemini-2.5-pro:{method}" + (
        "?alt=sse" if method == "streamGenerateContent" else ""
    )
    req = urllib.request.Request(url, data=json.dumps(body).encode(), headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=10) as resp:
        return str(resp.headers["Content-Type"]), resp.read()


def stream(model: GeminiModel, contents: list[dict[str, Any]]) -> dict[str, Any]:
    kind, raw = post(model, "streamGenerateContent", {"contents": contents, "tools": TOOLS})
    assert kind == "text/event-stream"
    events = [json.loads(line[len("data: ") :]) for line in raw.decode().splitlines() if line.startswith("data: ")]
    assert len(events) == 1
    return events[0]


def user(text: str) -> dict[str, Any]:
    return {"role": "user", "parts": [{"text": text}]}


def test_one_shell_call_per_reply_then_a_text_with_usage(model: GeminiModel) -> None:
    contents = [user(with_footer("Fix the typo.", "job-abc123", "n0nce", 30))]
    ran = []
    for _ in range(3):
        event = stream(model, contents)
        part = event["candidates"][0]["content"]["parts"][0]
        call = part["functionCall"]
        assert call["name"] == SHELL_TOOL and set(call["args"]) == {"command"}
        ran.append(call["args"]["command"])
        contents += [
            {"role": "model", "parts": [part]},
            {"role": "user", "parts": [{"functionResponse": {"name": SHELL_TOOL, "response": {"output": "ok"}}}]},
        ]
    assert [c.split()[:3] for c in ran] == [["mam", "event", k] for k in ("started", "progress", "completed")]
    last = stream(model, contents)
    assert last["candidates"][0]["content"] == {"role": "model", "parts": [{"text": FINAL_TEXT}]}
    usage = last["usageMetadata"]
    assert usage["totalTokenCount"] == usage["promptTokenCount"] + usage["candidatesTokenCount"] > 0
    assert [r.reply for r in model.snapshot()] == ["tool", "tool", "tool", "text"]
    assert all(user_texts(r.body) == [contents[0]["parts"][0]["text"]] for r in model.snapshot())


def test_a_json_side_query_gets_json_that_fills_its_schema(model: GeminiModel) -> None:
    schema = {
        "type": "object",
        "properties": {
            "reasoning": {"type": "string"},
            "model_choice": {"type": "string", "enum": ["flash", "pro"]},
            "score": {"type": "integer"},
        },
    }
    kind, raw = post(
        model,
        "generateContent",
        {
            "contents": [user("route this")],
            "generationConfig": {"responseMimeType": "application/json", "responseJsonSchema": schema},
        },
    )
    assert kind == "application/json"
    reply = json.loads(raw)
    assert json.loads(reply["candidates"][0]["content"]["parts"][0]["text"]) == {
        "reasoning": "scripted",
        "model_choice": "flash",
        "score": 1,
    }
    assert model.snapshot()[0].reply == "side" and model.commands_run() == []
    assert fill_schema({"type": "ARRAY"}) == [] and fill_schema({"type": "BOOLEAN"}) is False


def test_an_unknown_route_is_a_404(model: GeminiModel) -> None:
    req = urllib.request.Request(
        f"{model.base_url}/v1beta/files", data=b"{}", headers={"Content-Type": "application/json"}
    )
    with pytest.raises(urllib.error.HTTPError) as caught:
        urllib.request.urlopen(req, timeout=10)
    assert caught.value.code == 404
