"""A scripted stand-in for a Gemini model, on loopback, for driving the real Gemini CLI in tests.

It speaks the Gemini API the way gemini 0.61.0 calls it at `GOOGLE_GEMINI_BASE_URL`:

- `POST /v1beta/models/<model>:streamGenerateContent?alt=sse`: the turn, streamed as
  `data: {"candidates": [...], "usageMetadata": {...}}` events; a tool call is a
  `functionCall` part, its result comes back in the next request as a `functionResponse` part;
- `POST /v1beta/models/<model>:generateContent`: side queries (the model router, which asks for
  JSON with a `responseJsonSchema`), answered with one JSON object that fills the schema.

The script is tests/real/openai_server.py's: the footer's `started`, any `RUN:` lines of the
brief, `progress`, `completed`, one `run_shell_command` call per reply, then a short text. Every
request and the usage sent back for it is recorded for the test to read.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from tests.real._http import LoopbackServer, QuietHandler, serve_until_interrupted
from tests.real.openai_server import FINAL_TEXT, Step, named_tool, next_step

SHELL_TOOL = "run_shell_command"


@dataclass
class Recorded:
    """One request the server answered: streamed or not, the parsed body, and what it sent back."""

    api: str  # "stream" or "generate"
    model: str
    body: dict[str, Any]
    reply: str  # "tool", "text" or "side"
    command: str | None = None
    usage: dict[str, int] = field(default_factory=dict)


# -- reading a conversation -----------------------------------------------------------------
def _parts(content: Any) -> list[dict[str, Any]]:
    parts = content.get("parts") if isinstance(content, dict) else None
    return [p for p in parts if isinstance(p, dict)] if isinstance(parts, list) else []


def _text(content: Any) -> str:
    return "\n".join(str(p["text"]) for p in _parts(content) if isinstance(p.get("text"), str))


def user_texts(body: dict[str, Any]) -> list[str]:
    """The text of every user turn of a request (tool results aside), in order."""
    out = []
    for c in body.get("contents") or []:
        if isinstance(c, dict) and c.get("role") == "user" and not any("functionResponse" in p for p in _parts(c)):
            out.append(_text(c))
    return out


def turn(contents: list[Any]) -> tuple[str, int]:
    """(text of the last user turn that is not a tool result, tool results after it)."""
    last, done = "", 0
    for c in contents:
        if not isinstance(c, dict) or c.get("role") != "user":
            continue
        results = sum(1 for p in _parts(c) if "functionResponse" in p)
        if results:
            done += results
        else:
            last, done = _text(c), 0
    return last, done


def tool_names(body: dict[str, Any]) -> set[str]:
    names = set()
    for tool in body.get("tools") or []:
        for decl in (tool.get("functionDeclarations") or []) if isinstance(tool, dict) else []:
            if isinstance(decl, dict) and decl.get("name"):
                names.add(str(decl["name"]))
    return names


def fill_schema(schema: Any) -> Any:
    """A value that satisfies a (small) JSON schema: the first enum value, a string, 1, false..."""
    if not isinstance(schema, dict):
        return "scripted"
    if schema.get("enum"):
        return schema["enum"][0]
    kind = str(schema.get("type", "object")).lower()
    if kind == "object":
        props = schema.get("properties") or {}
        return {k: fill_schema(v) for k, v in props.items()}
    if kind == "array":
        return []
    if kind in ("integer", "number"):
        return 1
    if kind == "boolean":
        return False
    return "scripted"


# -- the server -----------------------------------------------------------------------------
class GeminiModel(LoopbackServer[Recorded]):
    """The server: `start()`, then point gemini at `base_url`; read `snapshot()` afterwards."""

    thread_name = "gemini-model"

    def __init__(self, *, log_path: str | None = None, more: Callable[[str], list[Step]] | None = None) -> None:
        super().__init__(log_path=log_path)
        self.more = more  # a test's own steps for a user turn (tests/real/openai_server.py script_for)

    def _handler_class(self) -> type[_Handler]:
        return _Handler

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def commands_run(self) -> list[str]:
        return [r.command for r in self.snapshot() if r.command]

    def _log_entry(self, rec: Recorded) -> dict[str, Any]:
        return {
            "api": rec.api,
            "model": rec.model,
            "reply": rec.reply,
            "command": rec.command,
            "usage": rec.usage,
            "body": rec.body,
        }

    # one reply: a list of parts and the usage
    def answer(self, api: str, model: str, body: dict[str, Any]) -> dict[str, Any]:
        config = body.get("generationConfig") or {}
        schema = config.get("responseJsonSchema") or config.get("responseSchema")
        side = (
            bool(schema) or config.get("responseMimeType") == "application/json" or SHELL_TOOL not in tool_names(body)
        )
        step: Step | None = None
        if side:
            parts: list[dict[str, Any]] = [
                {
                    "text": json.dumps(fill_schema(schema))
                    if schema or config.get("responseMimeType") == "application/json"
                    else "Scripted title"
                }
            ]
        else:
            text, done = turn(body.get("contents") or [])
            step = next_step(text, done, self.more)
            call = {"name": SHELL_TOOL, "args": {"command": step.command}} if step else None
            if step and step.tool:
                call = {"name": named_tool(list(tool_names(body)), step.tool), "args": dict(step.args)}
            parts = [{"functionCall": call}] if call else [{"text": FINAL_TEXT}]
        prompt_tokens, out_tokens = max(1, len(json.dumps(body)) // 4), 12
        usage = {
            "promptTokenCount": prompt_tokens,
            "candidatesTokenCount": out_tokens,
            "totalTokenCount": prompt_tokens + out_tokens,
        }
        self._record(
            Recorded(
                api,
                model,
                body,
                "side" if side else ("tool" if step else "text"),
                step.command if step else None,
                usage,
            )
        )
        return {
            "candidates": [{"content": {"role": "model", "parts": parts}, "finishReason": "STOP", "index": 0}],
            "usageMetadata": usage,
            "modelVersion": model,
        }


class _Handler(QuietHandler):
    server_owner: GeminiModel

    def do_GET(self) -> None:  # noqa: N802
        self._json(404, {"error": {"code": 404, "message": f"no route {self.path}", "status": "NOT_FOUND"}})

    def do_POST(self) -> None:  # noqa: N802
        raw = self._body()
        try:
            body = json.loads(raw or b"{}")
        except ValueError:
            self._json(400, {"error": {"code": 400, "message": "body is not JSON", "status": "INVALID_ARGUMENT"}})
            return
        path = self.path.split("?", 1)[0]
        model, _, method = path.rsplit("/", 1)[-1].partition(":")
        if "/models/" not in path or method not in ("streamGenerateContent", "generateContent", "countTokens"):
            self._json(404, {"error": {"code": 404, "message": f"no route {self.path}", "status": "NOT_FOUND"}})
        elif method == "countTokens":
            self._json(200, {"totalTokens": max(1, len(raw) // 4)})
        elif method == "generateContent":
            self._json(200, self.server_owner.answer("generate", model, body))
        else:
            self._sse([f"data: {json.dumps(self.server_owner.answer('stream', model, body))}\r\n\r\n"])


if __name__ == "__main__":  # a manual run: print the URL and serve until interrupted
    serve_until_interrupted(GeminiModel)
