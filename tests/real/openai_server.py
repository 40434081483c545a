"""A scripted stand-in for an OpenAI-style model, on loopback, for driving real CLIs in tests.

It speaks two wire formats, both streamed as server-sent events:

- the Responses API (`POST /v1/responses`) the way Codex 0.171 calls it: response.created,
  response.output_item.added, response.function_call_arguments.delta/.done or
  response.output_text.delta, response.output_item.done, response.completed with usage;
  tool results come back as `function_call_output` items;
- Chat Completions (`POST /v1/chat/completions`, `stream_options.include_usage`) for
  opencode: delta chunks, streamed `tool_calls`, a final usage chunk, `data: [DONE]`.

The "model" is a script, not a model: it finds the mam footer's commands in the last user
turn and asks, one tool call per reply, to run `started`, then any `RUN: <command>` lines of
the brief, then `progress`, then `completed` (not those two when the brief has a `NO-REPORT` line);
then it answers with a short text. Side queries
(a title asked for as JSON, a request with no tools) get a short answer. Every request and the
usage sent back for it is recorded for the test to read; `hold_reply(after_started)` holds back
the reply that follows the footer's `started` (tests/real/_http.py `Hold`). Nothing here touches the network
beyond the loopback socket it listens on.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

from tests.real._http import LoopbackServer, QuietHandler, serve_until_interrupted, sse_event

# A footer line that names a command: `mam event <type> ...` (mam may be an absolute path).
FOOTER_COMMAND = re.compile(r"((?:/\S*/)?mam event (started|progress|completed)\b.*?)\s*$")
# A brief line asking the scripted model to run one more command between started and progress;
# `RUN-ESCALATED:` asks the CLI to run it outside its sandbox (Codex: `require_escalated`).
RUN_LINE = re.compile(r"^\s*RUN(-ESCALATED)?: (.+?)\s*$")
FINAL_TEXT = "Done: reported the job to mam."
# A brief line asking the scripted model to run `started` (and the RUN lines) only, then end its turn with a
# text: a job never reported (mam's reminders name the commands again; the model answers them with a text).
NO_REPORT = "NO-REPORT"


@dataclass
class Recorded:
    """One request the server answered: which API, the parsed body, and what it sent back."""

    api: str  # "responses" or "chat"
    path: str
    body: dict[str, Any]
    reply: str  # "tool", "text" or "side"; "given up": held back (`hold_reply`) and never answered
    command: str | None = None
    usage: dict[str, int] = field(default_factory=dict)


@dataclass(frozen=True)
class Step:
    command: str
    escalate: bool = False  # ask to run outside the CLI's sandbox
    tool: str = ""  # call the offered tool whose name ends with this (an MCP server's) instead of the shell
    args: tuple[tuple[str, Any], ...] = ()  # that call's arguments


def tool_step(tool: str, args: dict[str, Any]) -> Step:
    """A step that calls an MCP tool (found by the end of its name, as each CLI prefixes its own)."""
    return Step(f"MCP {tool} {json.dumps(args, sort_keys=True)}", tool=tool, args=tuple(sorted(args.items())))


def named_tool(names: list[str], tool: str) -> str:
    """The offered tool that is `tool` of an MCP server (claude: mcp__mam__x, opencode: mam_x, ...)."""
    ends = ("_" + tool, "." + tool, "/" + tool, ":" + tool)
    found = [n for n in names if n == tool or n.endswith(ends)]
    if not found:
        raise LookupError(f"no tool {tool!r} among {sorted(names)}")
    return min(found, key=len)


def script_for(text: str, more: Callable[[str], list[Step]] | None = None) -> list[Step]:
    """The commands the scripted model runs for a user turn, in order (`more`: a test's own steps
    for the turn, run after `started`, like RUN lines)."""
    found: dict[str, str] = {}
    extra: list[Step] = []
    for line in text.splitlines():
        m = FOOTER_COMMAND.search(line)
        if m and m.group(2) not in found:
            found[m.group(2)] = m.group(1)
        r = RUN_LINE.match(line)
        if r:
            extra.append(Step(r.group(2), escalate=bool(r.group(1))))
    if more is not None:
        extra += more(text)
    if "started" not in found:
        return extra
    if any(line.strip() == NO_REPORT for line in text.splitlines()):
        return [Step(found["started"]), *extra]  # ends its turn without progress or completed
    return [Step(found["started"]), *extra, *(Step(found[k]) for k in ("progress", "completed") if k in found)]


def next_step(user_text: str, done: int, more: Callable[[str], list[Step]] | None = None) -> Step | None:
    """The command to run after `done` tool results, or None when it is time for the final text."""
    plan = script_for(user_text, more)
    return plan[done] if done < len(plan) else None


# -- reading a conversation -----------------------------------------------------------------
def _text_of(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n".join(str(p.get("text", "")) for p in content if isinstance(p, dict))
    return ""


def _is_context(text: str) -> bool:
    """Codex sends its environment and instructions as user messages wrapped in tags."""
    head = text.lstrip()
    return head.startswith("<") or head.startswith("# AGENTS.md")


def responses_turn(items: list[Any]) -> tuple[str, int]:
    """(text of the last real user message, tool results after it) for a Responses `input`."""
    last, done = "", 0
    for item in items:
        if not isinstance(item, dict):
            continue
        kind = item.get("type", "message")
        if kind == "message" and item.get("role") == "user":
            text = _text_of(item.get("content"))
            if not _is_context(text):
                last, done = text, 0
        elif kind == "function_call_output":
            done += 1
    return last, done


def chat_turn(messages: list[Any]) -> tuple[str, int]:
    """(text of the last user message, tool results after it) for Chat Completions `messages`."""
    last, done = "", 0
    for m in messages:
        if not isinstance(m, dict):
            continue
        if m.get("role") == "user":
            last, done = _text_of(m.get("content")), 0
        elif m.get("role") == "tool":
            done += 1
    return last, done


def responses_texts(body: dict[str, Any]) -> list[str]:
    """Every user message text of a Responses request (what the model was shown as the user's)."""
    return [
        _text_of(i.get("content"))
        for i in body.get("input", [])
        if isinstance(i, dict) and i.get("type", "message") == "message" and i.get("role") == "user"
    ]


def chat_texts(body: dict[str, Any]) -> list[str]:
    return [
        _text_of(m.get("content")) for m in body.get("messages", []) if isinstance(m, dict) and m.get("role") == "user"
    ]


def after_started(body: dict[str, Any]) -> bool:
    """The main-turn Responses request that follows the footer's `started` (its result is in): a hold point."""
    fmt = (body.get("text") or {}).get("format") or {}
    if fmt.get("type") == "json_schema" or not body.get("tools"):
        return False
    items = body.get("input", [])
    text, done = responses_turn(items if isinstance(items, list) else [])
    plan = script_for(text)
    return done == 1 and bool(plan) and " event started " in f" {plan[0].command} "


# -- tools ----------------------------------------------------------------------------------
def _tool_names(tools: list[Any]) -> dict[str, dict[str, Any]]:
    """Tool name -> parameters; a tool of a Responses `namespace` group (Codex: one per MCP server) as
    `<namespace>::<name>` (its call names both: see `responses`)."""
    named: dict[str, dict[str, Any]] = {}
    for t in tools or []:
        if not isinstance(t, dict):
            continue
        if t.get("type") == "namespace":
            for inner, params in _tool_names(t.get("tools") or []).items():
                named[f"{t.get('name')}::{inner}"] = params
            continue
        fn = t.get("function") if isinstance(t.get("function"), dict) else t
        if fn.get("name"):
            named[str(fn["name"])] = fn.get("parameters") or {}
    return named


def shell_call(tools: list[Any], step: Step) -> tuple[str, dict[str, Any]]:
    """The shell tool the CLI offers and the arguments that run `step` with it."""
    named = _tool_names(tools)
    if step.tool:
        return named_tool(list(named), step.tool), dict(step.args)
    command = step.command
    if "exec_command" in named:  # Codex's unified exec tool
        if step.escalate:
            return "exec_command", {
                "cmd": command,
                "sandbox_permissions": "require_escalated",
                "justification": "The brief asks for it",
            }
        return "exec_command", {"cmd": command}
    if "shell" in named:  # older Codex builds
        return "shell", {"command": ["bash", "-c", command]}
    for name in ("bash", "Bash", "shell_command", "run_shell_command", "run_terminal_command", "terminal"):
        if name in named:
            params = named[name]
            args: dict[str, Any] = {"command": command}
            for req in params.get("required", []):
                args.setdefault(req, "Report progress to mam")
            return name, args
    raise LookupError(f"no shell tool among {sorted(named)}")


# -- the server -----------------------------------------------------------------------------
class ScriptedModel(LoopbackServer[Recorded]):
    """The server: `start()`, then point a CLI at `base_url`; read `requests` afterwards."""

    def __init__(
        self,
        *,
        model: str = "scripted-model",
        log_path: str | None = None,
        more: Callable[[str], list[Step]] | None = None,
    ) -> None:
        super().__init__(log_path=log_path)  # if set, every request is appended there as a JSON line
        self.model = model
        self.more = more  # a test's own steps for a user turn (see script_for)
        self._counter = 0

    def _handler_class(self) -> type[_Handler]:
        return _Handler

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    # what a test reads
    def commands_run(self) -> list[str]:
        return [r.command for r in self.snapshot() if r.command]

    def usage_total(self) -> dict[str, int]:
        total: dict[str, int] = {}
        for r in self.snapshot():
            for k, v in r.usage.items():
                total[k] = total.get(k, 0) + v
        return total

    # internals
    def _next_id(self) -> int:
        with self._lock:
            self._counter += 1
            return self._counter

    def _log_entry(self, rec: Recorded) -> dict[str, Any]:
        return {"api": rec.api, "reply": rec.reply, "command": rec.command, "usage": rec.usage, "body": rec.body}

    def _usage(self, body: dict[str, Any]) -> tuple[int, int]:
        """Deterministic token counts: input ~ request size / 4, output fixed per reply."""
        return max(1, len(json.dumps(body)) // 4), 12

    # Responses API
    def responses(self, body: dict[str, Any]) -> Iterator[tuple[str, dict[str, Any]]]:
        n = self._next_id()
        rid = f"resp_{n}"
        items = body.get("input", [])
        text, done = responses_turn(items if isinstance(items, list) else [])
        fmt = (body.get("text") or {}).get("format") or {}
        side = fmt.get("type") == "json_schema" or not body.get("tools")
        step = None if side else next_step(text, done, self.more)
        in_tok, out_tok = self._usage(body)
        usage = {"input_tokens": in_tok, "output_tokens": out_tok}
        self._record(
            Recorded(
                "responses",
                "/v1/responses",
                body,
                "side" if side else ("tool" if step else "text"),
                step.command if step else None,
                usage,
            )
        )

        yield _event("response.created", response={"id": rid, "status": "in_progress", "model": self.model})
        if step is not None:
            name, args = shell_call(body.get("tools", []), step)
            arguments = json.dumps(args)
            namespace, _, name = name.rpartition("::")
            item = {
                "type": "function_call",
                "id": f"fc_{n}",
                "call_id": f"call_{n}",
                **({"namespace": namespace} if namespace else {}),
                "name": name,
                "arguments": "",
                "status": "in_progress",
            }
            at = {"item_id": item["id"], "output_index": 0}
            yield _event("response.output_item.added", output_index=0, item=item)
            yield _event("response.function_call_arguments.delta", **at, delta=arguments)
            yield _event("response.function_call_arguments.done", **at, arguments=arguments)
            yield _event(
                "response.output_item.done",
                output_index=0,
                item={**item, "arguments": arguments, "status": "completed"},
            )
        else:
            reply = _side_text(fmt) if side else FINAL_TEXT
            msg = {"type": "message", "id": f"msg_{n}", "role": "assistant", "status": "in_progress", "content": []}
            part = {"type": "output_text", "text": "", "annotations": []}
            at = {"item_id": msg["id"], "output_index": 0, "content_index": 0}
            yield _event("response.output_item.added", output_index=0, item=msg)
            yield _event("response.content_part.added", **at, part=part)
            yield _event("response.output_text.delta", **at, delta=reply)
            yield _event("response.output_text.done", **at, text=reply)
            yield _event(
                "response.output_item.done",
                output_index=0,
                item={**msg, "status": "completed", "content": [{**part, "text": reply}]},
            )
        yield _event(
            "response.completed",
            response={
                "id": rid,
                "status": "completed",
                "model": self.model,
                "usage": {
                    "input_tokens": in_tok,
                    "input_tokens_details": {"cached_tokens": 0},
                    "output_tokens": out_tok,
                    "output_tokens_details": {"reasoning_tokens": 0},
                    "total_tokens": in_tok + out_tok,
                },
            },
        )

    # Chat Completions
    def chat_once(self, body: dict[str, Any]) -> dict[str, Any]:
        return _collect(self.chat({**body, "stream_options": {"include_usage": True}}))

    def chat(self, body: dict[str, Any]) -> Iterator[dict[str, Any]]:
        n = self._next_id()
        cid = f"chatcmpl-{n}"
        msgs = body.get("messages", [])
        text, done = chat_turn(msgs if isinstance(msgs, list) else [])
        side = not body.get("tools")
        step = None if side else next_step(text, done, self.more)
        in_tok, out_tok = self._usage(body)
        usage = {"input_tokens": in_tok, "output_tokens": out_tok}
        self._record(
            Recorded(
                "chat",
                "/v1/chat/completions",
                body,
                "side" if side else ("tool" if step else "text"),
                step.command if step else None,
                usage,
            )
        )

        def chunk(delta: dict[str, Any], finish: str | None = None) -> dict[str, Any]:
            choice = {"index": 0, "delta": delta, "finish_reason": finish}
            return {
                "id": cid,
                "object": "chat.completion.chunk",
                "created": 0,
                "model": self.model,
                "choices": [choice],
            }

        yield chunk({"role": "assistant", "content": ""})
        if step is not None:
            name, args = shell_call(body.get("tools", []), step)
            call = {"index": 0, "id": f"call_{n}", "type": "function", "function": {"name": name, "arguments": ""}}
            yield chunk({"tool_calls": [call]})
            yield chunk({"tool_calls": [{"index": 0, "function": {"arguments": json.dumps(args)}}]})
            yield chunk({}, "tool_calls")
        else:
            yield chunk({"content": "Scripted title" if side else FINAL_TEXT})
            yield chunk({}, "stop")
        if (body.get("stream_options") or {}).get("include_usage"):
            yield {
                "id": cid,
                "object": "chat.completion.chunk",
                "created": 0,
                "model": self.model,
                "choices": [],
                "usage": {"prompt_tokens": in_tok, "completion_tokens": out_tok, "total_tokens": in_tok + out_tok},
            }


def _collect(chunks: Iterator[dict[str, Any]]) -> dict[str, Any]:
    """Fold a streamed completion into the one JSON object a non-streaming request expects."""
    text, calls, finish, usage, head = "", [], "stop", None, {}
    for c in chunks:
        head = head or c
        usage = c.get("usage") or usage
        for choice in c.get("choices", []):
            delta = choice.get("delta") or {}
            text += delta.get("content") or ""
            for tc in delta.get("tool_calls") or []:
                if tc.get("id"):
                    calls.append(
                        {
                            "id": tc["id"],
                            "type": "function",
                            "function": {"name": tc["function"]["name"], "arguments": ""},
                        }
                    )
                calls[-1]["function"]["arguments"] += tc.get("function", {}).get("arguments") or ""
            finish = choice.get("finish_reason") or finish
    message: dict[str, Any] = {"role": "assistant", "content": text or None}
    if calls:
        message["tool_calls"] = calls
    return {
        "id": head.get("id"),
        "object": "chat.completion",
        "created": 0,
        "model": head.get("model"),
        "choices": [{"index": 0, "message": message, "finish_reason": finish}],
        "usage": usage,
    }


def _event(kind: str, **fields: Any) -> tuple[str, dict[str, Any]]:
    """One Responses stream event: its SSE name and its data (which repeats the name as `type`)."""
    return kind, {"type": kind, **fields}


def _side_text(fmt: dict[str, Any]) -> str:
    """An answer to a side query: valid JSON for a json_schema format (every required string set)."""
    if fmt.get("type") != "json_schema":
        return "Scripted title"
    schema = fmt.get("schema") or {}
    props = schema.get("properties") or {}
    return json.dumps({k: "Scripted title" for k in (schema.get("required") or list(props) or ["title"])})


class _Handler(QuietHandler):
    server_owner: ScriptedModel

    def do_GET(self) -> None:  # noqa: N802
        if self.path.rstrip("/").endswith("/models"):
            owner = self.server_owner
            self._json(
                200,
                {
                    "object": "list",
                    "data": [{"id": owner.model, "object": "model", "owned_by": "mam-tests"}],
                    "models": [],
                },
            )
        else:
            self._json(404, {"error": {"message": f"no route {self.path}"}})

    def do_POST(self) -> None:  # noqa: N802
        try:
            body = json.loads(self._body() or b"{}")
        except ValueError:
            self._json(400, {"error": {"message": "body is not JSON"}})
            return
        path = self.path.split("?", 1)[0].rstrip("/")
        if path.endswith("/responses"):
            if self.server_owner._held(body, self.connection) is False:
                self.server_owner._record(Recorded("responses", "/v1/responses", body, "given up"))
                self.close_connection = True
                return
            self._sse(sse_event(name, data) for name, data in self.server_owner.responses(body))
        elif path.endswith("/chat/completions"):
            if not body.get("stream"):  # e.g. hermes' title query: one plain JSON completion
                self._json(200, self.server_owner.chat_once(body))
                return
            events = (f"data: {json.dumps(c)}\n\n" for c in self.server_owner.chat(body))
            self._sse(_then_done(events))
        else:
            self._json(404, {"error": {"message": f"no route {self.path}"}})


def _then_done(events: Iterator[str]) -> Iterator[str]:
    yield from events
    yield "data: [DONE]\n\n"


if __name__ == "__main__":  # a manual run: print the URL and serve until interrupted
    serve_until_interrupted(ScriptedModel)
