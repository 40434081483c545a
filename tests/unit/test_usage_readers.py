"""The usage readers of gemini, grok and hermes on records shaped as the real programs wrote them
(gemini 0.61.0, grok 0.2.111, hermes 0.19.0 in tests/real; the real runs check them token for token)."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path
from types import SimpleNamespace

import pytest

from mam.jobs import usage as usage_module
from mam.usage.readers import gemini_transcripts, grok_updates, hermes_db
from mam.workspace import Workspace

T0 = 1_796_542_300_000  # ms


def iso(ms: int) -> str:
    from datetime import datetime, timezone

    return datetime.fromtimestamp(ms / 1000, tz=timezone.utc).isoformat().replace("+00:00", "Z")


def gemini_message(mid: str, at: int, tokens: dict[str, int]) -> dict[str, object]:
    return {"id": mid, "timestamp": iso(at), "type": "gemini", "thoughts": [], "tokens": tokens}


def test_gemini_counts_each_message_once_within_the_job(tmp_path: Path) -> None:
    a = gemini_message("a", T0 + 100, {"input": 1000, "output": 12, "cached": 200, "thoughts": 5, "tool": 3})
    b = gemini_message("b", T0 + 200, {"input": 1100, "output": 12, "cached": 0, "thoughts": 0, "tool": 0})
    late = gemini_message("c", T0 + 900, {"input": 1200, "output": 12})
    lines = [
        {"sessionId": "s", "startTime": iso(T0)},
        {"id": "u", "timestamp": iso(T0 + 50), "type": "user", "content": [{"text": "brief"}]},
        a,
        a,  # gemini writes a message again on a later line
        b,
        {"$set": {"messages": [a, b, late]}},  # and rewrites the whole list
    ]
    path = tmp_path / "session-x.jsonl"
    path.write_text("".join(json.dumps(line) + "\n" for line in lines) + '{"id": "trunc', encoding="utf-8")
    usage = gemini_transcripts([path], T0, T0 + 500)
    assert usage == {
        "input_tokens": 800 + 3 + 1100,
        "output_tokens": 12 + 5 + 12,
        "cache_read_tokens": 200,
        "cache_write_tokens": 0,
        "messages": 2,
        "source": "gemini-transcript",
    }
    assert gemini_transcripts([path], T0 + 1000, T0 + 2000) is None


def grok_line(kind: str, at: int, **update: object) -> dict[str, object]:
    return {
        "timestamp": at // 1000,
        "method": "session/update",
        "params": {"sessionId": "s", "update": {"sessionUpdate": kind, **update}, "_meta": {"agentTimestampMs": at}},
    }


def turn_completed(at: int, inp: int, out: int, cached: int = 0) -> dict[str, object]:
    usage = {"inputTokens": inp, "outputTokens": out, "cachedReadTokens": cached}
    return grok_line("turn_completed", at, usage=usage)


def test_grok_counts_the_turns_begun_within_the_job_and_waits_for_one_in_flight(tmp_path: Path) -> None:
    path = tmp_path / "updates.jsonl"
    lines = [
        grok_line("user_message_chunk", T0 - 500),
        turn_completed(T0 - 400, 5000, 48),  # an earlier job's turn
        grok_line("user_message_chunk", T0 + 10),
        grok_line("user_message_chunk", T0 + 11),  # the same prompt's second chunk
        grok_line("tool_call", T0 + 20),
    ]
    path.write_text("".join(json.dumps(line) + "\n" for line in lines), encoding="utf-8")
    assert grok_updates(path, T0, T0 + 100) == (None, False)  # its turn is still under way
    with open(path, "a", encoding="utf-8") as f:
        f.write(json.dumps(turn_completed(T0 + 150, 43591, 48, cached=591)) + "\n")
    usage, settled = grok_updates(path, T0, T0 + 100)
    assert settled and usage == {
        "input_tokens": 43000,
        "output_tokens": 48,
        "cache_read_tokens": 591,
        "cache_write_tokens": 0,
        "messages": 1,
        "source": "grok-updates",
    }


def hermes_store(path: Path) -> sqlite3.Connection:
    conn = sqlite3.connect(path)
    conn.execute(
        "CREATE TABLE sessions (id TEXT PRIMARY KEY, input_tokens INTEGER DEFAULT 0, output_tokens INTEGER DEFAULT 0,"
        " cache_read_tokens INTEGER DEFAULT 0, cache_write_tokens INTEGER DEFAULT 0)"
    )
    conn.execute(
        "CREATE TABLE messages (id INTEGER PRIMARY KEY AUTOINCREMENT, session_id TEXT, role TEXT,"
        " finish_reason TEXT, timestamp REAL)"
    )
    return conn


def test_hermes_is_the_running_totals_less_those_before_the_claim_once_the_turn_ended(tmp_path: Path) -> None:
    db = tmp_path / "state.db"
    conn = hermes_store(db)
    base = {"input_tokens": 1000, "output_tokens": 24, "cache_read_tokens": 0, "cache_write_tokens": 0}
    with conn:
        conn.execute("INSERT INTO sessions VALUES ('s', 1000, 24, 0, 0)")
        conn.execute(
            "INSERT INTO messages (session_id, role, finish_reason, timestamp) VALUES ('s', 'assistant', 'stop', ?)",
            ((T0 - 500) / 1000,),
        )
        conn.execute("UPDATE sessions SET input_tokens = 3500, output_tokens = 48, cache_read_tokens = 7")
        conn.execute(
            "INSERT INTO messages (session_id, role, finish_reason, timestamp) VALUES ('s', 'user', NULL, ?)",
            ((T0 + 10) / 1000,),
        )
    usage, settled = hermes_db(db, "s", base, T0)
    assert not settled and usage is not None and usage["input_tokens"] == 2500  # the turn is under way
    with conn:
        conn.execute(
            "INSERT INTO messages (session_id, role, finish_reason, timestamp) VALUES ('s', 'assistant', 'stop', ?)",
            ((T0 + 90) / 1000,),
        )
    conn.close()
    assert hermes_db(db, "s", base, T0) == (
        {
            "input_tokens": 2500,
            "output_tokens": 24,
            "cache_read_tokens": 7,
            "cache_write_tokens": 0,
            "source": "hermes-db",
        },
        True,
    )
    assert hermes_db(db, "other", {}, T0) == (None, False)


@pytest.mark.parametrize(
    ("reason", "waits"),
    [
        ("completed", True),
        ("agent_error", True),
        ("ended_without_report", True),
        ("wall_clock_timeout", False),
        ("deadline_timeout", False),
        ("agent_blocked", False),
        ("cancelled_by_user", False),
    ],
)
def test_only_a_job_its_agent_ended_waits_for_a_record_in_flight(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, reason: str, waits: bool
) -> None:
    """A job ended at a deadline or by mam (a prompt left up) has a turn that may never end: its usage is
    read once, where a job its agent ended waits up to SETTLE_S for its last response's record."""
    asked: list[bool] = []

    def job_usage(agent: str, **kw: object) -> dict[str, int]:
        asked.append(bool(kw["settle"]))
        return {"input_tokens": 1}

    monkeypatch.setattr(usage_module, "job_usage", job_usage)
    row = SimpleNamespace(name="s", agent="grok", conversation_id="c", cwd=str(tmp_path), agent_env={})
    registry = SimpleNamespace(find_session=lambda name: row)
    job = SimpleNamespace(session="s", claimed_ms=T0, delivered_ms=T0, ended_ms=T0 + 1000, reason=reason, id="j")
    ledger = SimpleNamespace(job=job, usage_base=None)
    ws = Workspace(tmp_path)
    assert usage_module.measure(ws, registry, ledger) == {"input_tokens": 1}  # type: ignore[arg-type]
    assert usage_module.measure(ws, registry, ledger, settle=False) == {"input_tokens": 1}  # type: ignore[arg-type]
    assert asked == [waits, False]
