"""Token usage per job, from the agent CLI's own records (never from the agent's say-so).

Only what the CLI recorded between the job's injection and its end counts:

- claude: its transcript (`transcript_path` from the SessionStart hook, else where the adapter
  finds it): the `usage` of each assistant message, once per message id (claude repeats it on the
  line of each content block), timestamped within the job;
- codex: its rollout: the `total_token_usage` of the last `token_count` event of the job (the
  response in flight at the end included, see codex_rollout), less that of the last one before
  the injection.

- opencode: its database's `step-finish` parts of the session (the step in flight at the end
  included, as for codex);
- gemini: its transcripts (`chats/session-*.jsonl`): the `tokens` of each `gemini` message, once
  per message id (it rewrites earlier messages in `$set` lines), timestamped within the job;
- grok: the session's `updates.jsonl`: the `usage` of each `turn_completed` whose turn (its
  `user_message_chunk`) began within the job; grok records usage per turn only, so a job counts
  whole turns, the closing reply after `mam event completed` included (the turn in flight at the
  end is waited for, as for codex);
- hermes: its `state.db` keeps only running totals per session (`sessions.input_tokens`, ...,
  added to after each model call): the job's usage is the totals at its end less those mam read
  right before the claim (`running_counters`); like grok it counts the job's whole turn, the
  closing reply included (mam waits for the turn's last assistant message); no usage when the
  counters before the claim were not read (a job taken over by another attempt);
- demo (mam's demo agent): its conversation file: the `usage` of each of its turns, timestamped
  within the job (the demo agent records a deterministic usage per job: see mam/demo/agent.py).

Each reader returns `{input_tokens, output_tokens, cache_read_tokens, cache_write_tokens, source}`
or None (nothing recorded, or a CLI mam reads no usage of).
"""

from __future__ import annotations

import json
import sqlite3
import time
from collections.abc import Iterator, Mapping
from datetime import datetime
from pathlib import Path
from typing import Any

from mam.agents import get_adapter

SETTLE_S = 5.0  # how long to wait for the record of a response still in flight at the job's end
KEYS = ("input_tokens", "output_tokens", "cache_read_tokens", "cache_write_tokens")


def _ms(stamp: Any) -> int | None:
    if not isinstance(stamp, str) or not stamp:
        return None
    try:
        return int(datetime.fromisoformat(stamp.replace("Z", "+00:00")).timestamp() * 1000)
    except ValueError:
        return None


def _lines(path: Path) -> Iterator[dict[str, Any]]:
    try:
        with open(path, encoding="utf-8") as f:
            for line in f:
                try:
                    entry = json.loads(line)
                except ValueError:
                    continue  # a line being written
                if isinstance(entry, dict):
                    yield entry
    except OSError:
        return


def _int(value: Any) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else 0


def claude_transcript(path: Path, since_ms: int, until_ms: int) -> dict[str, Any] | None:
    per_message: dict[str, Mapping[str, Any]] = {}
    for entry in _lines(path):
        message = entry.get("message")
        if entry.get("type") != "assistant" or not isinstance(message, dict) or not message.get("id"):
            continue
        at = _ms(entry.get("timestamp"))
        usage = message.get("usage")
        if at is None or not since_ms <= at <= until_ms or not isinstance(usage, dict):
            continue
        per_message[str(message["id"])] = usage
    if not per_message:
        return None
    total = {k: 0 for k in KEYS}
    for usage in per_message.values():
        total["input_tokens"] += _int(usage.get("input_tokens"))
        total["output_tokens"] += _int(usage.get("output_tokens"))
        total["cache_read_tokens"] += _int(usage.get("cache_read_input_tokens"))
        total["cache_write_tokens"] += _int(usage.get("cache_creation_input_tokens"))
    return {**total, "messages": len(per_message), "source": "claude-transcript"}


def codex_rollout(path: Path, since_ms: int, until_ms: int) -> tuple[dict[str, Any] | None, bool]:
    """(usage, settled). codex writes a response's `token_count` only after running the tool calls it
    asked for: the response whose tool call ended the job (`mam event completed`) is recorded just
    after the end. So the first `token_count` after the end counts too when a turn was still running
    at the end; `settled` is False while that record may still come (the caller looks again)."""
    before: Mapping[str, Any] = {}
    last: Mapping[str, Any] | None = None
    turn_running = False  # at until_ms
    settled = False
    for entry in _lines(path):
        payload = entry.get("payload")
        at = _ms(entry.get("timestamp"))
        if entry.get("type") != "event_msg" or not isinstance(payload, dict) or at is None:
            continue
        kind = payload.get("type")
        if kind in ("task_started", "task_complete") and at <= until_ms:
            turn_running = kind == "task_started"
            continue
        info = payload.get("info") if kind == "token_count" else None
        totals = info.get("total_token_usage") if isinstance(info, dict) else None
        if not isinstance(totals, dict):
            continue
        if at < since_ms:
            before = totals
        elif at <= until_ms:
            last = totals
        elif not settled:
            settled = True  # the response in flight at the end
            if turn_running:
                last = totals
    settled = settled or not turn_running
    if last is None:
        return None, settled

    def delta(key: str) -> int:
        return max(_int(last.get(key)) - _int(before.get(key)), 0) if last else 0

    usage = {
        "input_tokens": delta("input_tokens"),
        "output_tokens": delta("output_tokens"),
        "cache_read_tokens": delta("cached_input_tokens"),
        "cache_write_tokens": delta("cache_write_input_tokens"),
        "source": "codex-rollout",
    }
    return usage, settled


def opencode_db(db: Path, session_id: str, since_ms: int, until_ms: int) -> tuple[dict[str, Any] | None, bool]:
    """(usage, settled) from opencode's `step-finish` parts (`tokens`: input, output, reasoning,
    cache.read, cache.write), one per model step of that session, by their time. As with codex, the
    step whose tool call ended the job finishes just after the end: the first step-finish after the
    end counts when a step was under way at the end."""

    try:
        conn = sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=2.0)
    except sqlite3.Error:
        return None, True
    try:
        rows = conn.execute(
            "SELECT time_created, data FROM part WHERE session_id = ? ORDER BY time_created, id", (session_id,)
        ).fetchall()
    except sqlite3.Error:
        return None, True
    finally:
        conn.close()
    total = {k: 0 for k in KEYS}
    steps, running, settled = 0, False, False
    for created, data in rows:
        try:
            part = json.loads(data)
        except ValueError:
            continue
        kind = part.get("type") if isinstance(part, dict) else None
        at = int(created)
        if kind == "step-start" and since_ms <= at <= until_ms:
            running = True
        if kind != "step-finish" or at < since_ms:
            continue
        if at > until_ms:
            if settled or not running:
                break
            settled = True
        running = False
        raw = part.get("tokens")
        tokens: Mapping[str, Any] = raw if isinstance(raw, dict) else {}
        raw = tokens.get("cache")
        cache: Mapping[str, Any] = raw if isinstance(raw, dict) else {}
        total["input_tokens"] += _int(tokens.get("input"))
        total["output_tokens"] += _int(tokens.get("output"))
        total["cache_read_tokens"] += _int(cache.get("read"))
        total["cache_write_tokens"] += _int(cache.get("write"))
        steps += 1
    settled = settled or not running
    return ({**total, "messages": steps, "source": "opencode-db"} if steps else None), settled


def gemini_transcripts(paths: list[Path], since_ms: int, until_ms: int) -> dict[str, Any] | None:
    """The `tokens` gemini recorded per model message: input (promptTokenCount, which holds the cached
    part), output, cached, thoughts, tool (toolUsePromptTokenCount), total; once per message id."""
    per_message: dict[str, Mapping[str, Any]] = {}

    def take(entry: Any) -> None:
        if not isinstance(entry, dict) or entry.get("type") != "gemini" or not entry.get("id"):
            return
        at, tokens = _ms(entry.get("timestamp")), entry.get("tokens")
        if at is not None and since_ms <= at <= until_ms and isinstance(tokens, dict):
            per_message[str(entry["id"])] = tokens

    for path in paths:
        for entry in _lines(path):
            update = entry.get("$set")
            messages = update.get("messages") if isinstance(update, dict) else None
            for message in messages if isinstance(messages, list) else [entry]:
                take(message)
    if not per_message:
        return None
    total = {k: 0 for k in KEYS}
    for tokens in per_message.values():
        cached = _int(tokens.get("cached"))
        total["input_tokens"] += max(_int(tokens.get("input")) - cached, 0) + _int(tokens.get("tool"))
        total["output_tokens"] += _int(tokens.get("output")) + _int(tokens.get("thoughts"))
        total["cache_read_tokens"] += cached
    return {**total, "messages": len(per_message), "source": "gemini-transcript"}


def grok_updates(path: Path, since_ms: int, until_ms: int) -> tuple[dict[str, Any] | None, bool]:
    """(usage, settled) from grok's `updates.jsonl`: a turn begins at its `user_message_chunk` and its
    `turn_completed` holds the turn's usage (inputTokens, outputTokens, cachedReadTokens, reasoningTokens;
    OpenAI-style: input holds the cached part, output the reasoning). `settled` is False while a turn
    begun within the job has no `turn_completed` yet."""
    total = {k: 0 for k in KEYS}
    turns, in_job, open_turn = 0, False, False
    for entry in _lines(path):
        params = entry.get("params")
        update = params.get("update") if isinstance(params, dict) else None
        if not isinstance(update, dict):
            continue
        kind = update.get("sessionUpdate")
        if kind == "user_message_chunk":
            meta = params.get("_meta")  # type: ignore[union-attr]
            at = meta.get("agentTimestampMs") if isinstance(meta, dict) else None
            if not open_turn:  # a long prompt may come in several chunks: the first one starts the turn
                in_job = isinstance(at, int) and since_ms <= at <= until_ms
            open_turn = True
        elif kind == "turn_completed":
            usage = update.get("usage")
            if in_job and open_turn and isinstance(usage, dict):
                cached = _int(usage.get("cachedReadTokens"))
                total["input_tokens"] += max(_int(usage.get("inputTokens")) - cached, 0)
                total["output_tokens"] += _int(usage.get("outputTokens"))
                total["cache_read_tokens"] += cached
                turns += 1
            open_turn = False
    settled = not (in_job and open_turn)
    return ({**total, "messages": turns, "source": "grok-updates"} if turns else None), settled


HERMES_COUNTERS = {
    "input_tokens": "input_tokens",
    "output_tokens": "output_tokens",
    "cache_read_tokens": "cache_read_tokens",
    "cache_write_tokens": "cache_write_tokens",
}


def hermes_counters(db: Path, session_id: str | None) -> tuple[dict[str, int], float | None]:
    """(the session's running token totals, when its last turn ended): zeros for a session with no row
    yet; a turn has ended at an assistant message that asked for no tool as the session's last message
    (None: none yet, or a turn under way)."""
    zeros = {k: 0 for k in KEYS}
    if not session_id or not db.is_file():
        return zeros, None
    try:
        conn = sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=2.0)
    except sqlite3.Error:
        return zeros, None
    try:
        row = conn.execute(
            f"SELECT {', '.join(HERMES_COUNTERS.values())} FROM sessions WHERE id = ?", (session_id,)
        ).fetchone()
        last = conn.execute(
            "SELECT role, finish_reason, timestamp FROM messages WHERE session_id = ? ORDER BY id DESC LIMIT 1",
            (session_id,),
        ).fetchone()
    except sqlite3.Error:
        return zeros, None
    finally:
        conn.close()
    counters = {k: _int(v) for k, v in zip(HERMES_COUNTERS, row)} if row else zeros
    ended = last is not None and last[0] == "assistant" and last[1] not in ("tool_calls", None)
    return counters, float(last[2]) if ended and isinstance(last[2], (int, float)) else None


def hermes_db(db: Path, session_id: str, base: Mapping[str, int], since_ms: int) -> tuple[dict[str, Any] | None, bool]:
    """(usage, settled): the session's totals now less `base`; settled once a turn ended after `since_ms`."""
    now, ended_at = hermes_counters(db, session_id)
    settled = ended_at is not None and ended_at * 1000 >= since_ms
    usage = {k: max(now[k] - _int(base.get(k)), 0) for k in KEYS}
    if not any(usage.values()):
        return None, settled
    return {**usage, "source": "hermes-db"}, settled


COUNTER_AGENTS = ("hermes",)  # the CLIs whose records are running totals only (read before the claim)


def running_counters(agent: str, *, conversation_id: str | None, env: Mapping[str, str]) -> dict[str, int] | None:
    """The running token totals of a CLI that records only those (hermes), to subtract at the job's end;
    None for the CLIs whose records are read per message."""
    if agent not in COUNTER_AGENTS:
        return None
    return hermes_counters(get_adapter(agent).db(env), conversation_id)[0]  # type: ignore[attr-defined]


def demo_conversation(path: Path, since_ms: int, until_ms: int) -> dict[str, Any] | None:
    """The demo agent's conversation file: a JSON object whose `turns` each have a `ts` (seconds) and, for
    the agent's model turns, a `usage` with the four counts."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    turns = data.get("turns") if isinstance(data, dict) else None
    total = {k: 0 for k in KEYS}
    messages = 0
    for turn in turns if isinstance(turns, list) else []:
        usage = turn.get("usage") if isinstance(turn, dict) else None
        at = turn.get("ts") if isinstance(usage, dict) else None
        if not isinstance(at, (int, float)) or not since_ms <= at * 1000 <= until_ms:
            continue
        for key in KEYS:
            total[key] += _int(usage.get(key))  # type: ignore[union-attr]
        messages += 1
    return {**total, "messages": messages, "source": "demo-conversation"} if messages else None


def _settle(read: Any, wait: bool = True) -> dict[str, Any] | None:
    """`read()` -> (usage, settled), again until settled or SETTLE_S passed (`wait=False`: once)."""
    deadline = time.monotonic() + (SETTLE_S if wait else 0.0)
    while True:
        usage, settled = read()
        if settled or time.monotonic() >= deadline:
            return usage  # type: ignore[no-any-return]
        time.sleep(0.1)


def job_usage(
    agent: str,
    *,
    conversation_id: str | None,
    transcript_path: str,
    cwd: str,
    env: Mapping[str, str],
    since_ms: int,
    until_ms: int,
    settle: bool = True,
    base: Mapping[str, int] | None = None,
) -> dict[str, Any] | None:
    """The job's usage from the session's CLI records (None when there are none); `settle=False` reads
    what is there now, without waiting for the record of a response still in flight; `base`: the running
    counters read before the claim (`running_counters`), for hermes."""

    adapter = get_adapter(agent)
    if agent == "claude":
        path = Path(transcript_path) if transcript_path else None
        if (path is None or not path.is_file()) and conversation_id:
            path = adapter.transcript(conversation_id, cwd=cwd, env=env)  # type: ignore[attr-defined]
        return claude_transcript(path, since_ms, until_ms) if path is not None else None
    if agent == "codex" and conversation_id:
        rollouts = [p for p in adapter.conversation_files(conversation_id, cwd=cwd, env=env) if p.suffix == ".jsonl"]
        if not rollouts:
            return None
        return _settle(lambda: codex_rollout(rollouts[0], since_ms, until_ms), settle)
    if agent == "opencode" and conversation_id:
        db = adapter.db(env)  # type: ignore[attr-defined]
        return _settle(lambda: opencode_db(db, conversation_id, since_ms, until_ms), settle) if db.is_file() else None
    if agent == "gemini" and conversation_id:
        paths = [p for p in adapter.conversation_files(conversation_id, cwd=cwd, env=env) if p.suffix == ".jsonl"]
        return gemini_transcripts([p for p in paths if p.parent.name == "chats"], since_ms, until_ms)
    if agent == "grok" and conversation_id:
        folders = adapter.conversation_files(conversation_id, cwd=cwd, env=env)
        if not folders:
            return None
        return _settle(lambda: grok_updates(folders[0] / "updates.jsonl", since_ms, until_ms), settle)
    if agent == "hermes" and conversation_id and base is not None:
        db = adapter.db(env)  # type: ignore[attr-defined]
        return _settle(lambda: hermes_db(db, conversation_id, base, since_ms), settle)
    if agent == "demo" and conversation_id:
        path = next((p for p in adapter.conversation_files(conversation_id, cwd=cwd, env=env) if p.is_file()), None)
        return demo_conversation(path, since_ms, until_ms) if path is not None else None
    return None
