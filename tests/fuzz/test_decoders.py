"""Fuzzing everything that parses input mam does not control (issue 12, item 11): the envelope
decoder and the event gate, the dispatch decoder, the `.mam.env` parser and the loop's verdict
parser. Any input gives a result or a clear rejection (a DecodeError / MamError subclass with a
reason), never an unexpected exception.

Bounded for CI (MAM_FUZZ_EXAMPLES, default 150 per test); run with a larger number locally:
    MAM_FUZZ_EXAMPLES=5000 .venv/bin/python -m pytest -q -o timeout=0 tests/fuzz
"""

from __future__ import annotations

import json
import os
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from mam.bus.envelope import VERSION, Envelope, sign
from mam.envfile import parse_env_text
from mam.errors import ConfigError, DecodeError
from mam.jobs.gate import EventGate
from mam.loop.verdict import parse_verdict
from mam.remote.dispatch import Dispatch
from mam.remote.runner_job import brief_problem

FUZZ = settings(
    max_examples=int(os.environ.get("MAM_FUZZ_EXAMPLES", "150")),
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much],
)
KEY = "k" * 64
SECRET = "dispatch-secret"
NOW = 1_767_225_600_000

# JSON values of every kind, including what mam refuses: floats, huge integers, lone surrogates
# (as escapes), deep nesting, control characters, non-ASCII.
leaves = (
    st.none()
    | st.booleans()
    | st.integers()
    | st.integers(-(2**70), 2**70)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=30)
    | st.sampled_from(["", "..", "../../x", "\x1b[201~", "job-1", "\ud800", "agent", "event"])
)


def any_json() -> st.SearchStrategy[Any]:
    # A fresh strategy for each use: one recursive strategy shared by sibling draws trips
    # hypothesis' leaf counter ("inconsistent data generation").
    return st.recursive(
        leaves,
        lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4),
        max_leaves=20,
    )


def mostly(good: st.SearchStrategy[Any], draw: Any) -> Any:
    """Usually a well-formed value (so later checks are reached), sometimes any JSON at all."""
    return draw(any_json()) if draw(st.integers(0, 7)) == 0 else draw(good)


FIELDS = {
    "v": st.just(VERSION),
    "kind": st.sampled_from(["event", "state", "dispatch", "presence"]),
    "job": st.just("j1"),
    "seq": st.integers(0, 30) | st.integers(-5, 2**64),
    "type": st.sampled_from(["progress", "completed", "started", "error", "dispatch"]),
    "sender": st.sampled_from(["agent", "heartbeater", "runner", "origin"]),
    "ts": st.integers(0, 2**53) | st.integers(-5, 2**64),
    "body": st.dictionaries(
        st.sampled_from(["message", "report", "nonce", "heartbeat_ms", "reason"]) | st.text(max_size=8),
        any_json(),
        max_size=5,
    ),
    "sig": st.text(max_size=70),
}


@st.composite
def envelope_objects(draw: Any) -> dict[str, Any]:
    """Objects shaped nearly like an envelope: each field usually present and well-formed, sometimes
    missing or any JSON, sometimes with an extra field."""
    obj = {name: mostly(strategy, draw) for name, strategy in FIELDS.items() if draw(st.integers(0, 9)) > 0}
    if draw(st.integers(0, 7)) == 0:
        obj[draw(st.text(max_size=5))] = draw(any_json())
    return obj


def dumps(obj: Any) -> bytes:
    return json.dumps(obj, ensure_ascii=draw_ascii(obj)).encode("utf-8", "surrogatepass")


def draw_ascii(obj: Any) -> bool:
    return len(repr(obj)) % 2 == 0  # both escaped and raw non-ASCII text, deterministically


def resign(obj: dict[str, Any], key: str) -> dict[str, Any]:
    """Give an object a valid signature if its unsigned part is signable at all (to reach the later checks)."""
    unsigned = {k: v for k, v in obj.items() if k != "sig"}
    try:
        data = json.dumps(unsigned, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode("utf-8")
    except (TypeError, ValueError, UnicodeEncodeError):
        return obj
    return {**unsigned, "sig": sign(key, data)}


def decode_or_reject(raw: bytes, **kwargs: Any) -> Envelope | None:
    try:
        env = Envelope.decode(raw, **kwargs)
    except DecodeError as e:
        assert e.reason and str(e)
        return None
    # What decoded must survive everything a receiver does next.
    env.encode()
    env.verify(KEY)
    return env


@FUZZ
@given(st.binary(max_size=512))
def test_envelope_decoder_on_bytes(raw: bytes) -> None:
    decode_or_reject(raw)


@FUZZ
@given(envelope_objects(), st.booleans())
def test_envelope_decoder_on_near_envelopes(obj: dict[str, Any], signed: bool) -> None:
    decode_or_reject(dumps(resign(obj, KEY) if signed else obj))


@FUZZ
@given(st.lists(st.tuples(envelope_objects(), st.booleans(), st.sampled_from(["mqtt", "disk"])), max_size=5))
def test_the_gate_always_answers_with_a_verdict(messages: list[tuple[dict[str, Any], bool, str]]) -> None:
    gate = EventGate("j1", KEY)
    last = 0
    for obj, signed, path in messages:
        verdict = gate.check(dumps(resign(obj, KEY) if signed else obj), path)
        assert verdict.accepted or verdict.reason
        assert len(verdict.detail) < 300
        if verdict.accepted:
            assert verdict.envelope is not None and verdict.envelope.seq > last
            last = verdict.envelope.seq
        assert gate.last_seq == last


DISPATCH_BODY = {
    "runner": st.just("rb"),
    "session": st.sampled_from(["d1", "..", "../x", "a/b"]),
    "text": st.text(max_size=60),
    "key_nonce": st.just("0" * 32),
    "nonce": st.just("n"),
    "start_deadline_ms": st.integers(-5, 2**60),
    "heartbeat_ms": st.integers(-5, 2**60),
    "heartbeat_k_milli": st.integers(-5, 2**60) | st.integers(),
    "budget_ms": st.integers(-5, 2**60),
    "origin": st.text(max_size=10),
    "topic_prefix": st.sampled_from(["mam/x", "", "a//b", "#", "/x", "a/+/b"]),
}


@st.composite
def dispatches(draw: Any) -> bytes:
    """Dispatches, most of them validly signed, fresh and for this runner, with hostile fields mixed in."""
    body = {name: mostly(strategy, draw) for name, strategy in DISPATCH_BODY.items() if draw(st.integers(0, 11)) > 0}
    job = mostly(st.sampled_from(["job-1", "..", ".", "../../../trav/rjob", "", "j" * 129, "a/b"]), draw)
    obj = {
        "v": VERSION,
        "kind": draw(st.sampled_from(["dispatch", "dispatch", "event"])),
        "job": job,
        "seq": 0,
        "type": "dispatch",
        "sender": "origin",
        "ts": draw(st.sampled_from([NOW, NOW - 10**9]) | st.integers(0, 2**60)),
        "body": body,
    }
    return dumps(resign(obj, SECRET) if draw(st.integers(0, 4)) else {**obj, "sig": "0" * 64})


@FUZZ
@given(dispatches())
def test_the_dispatch_decoder_takes_or_rejects_with_a_reason(raw: bytes) -> None:
    try:
        msg = Dispatch.open(raw, secret=SECRET, runner="rb", now_ms=NOW, freshness_ms=300_000)
    except DecodeError as e:
        assert e.reason and str(e)
        return
    from mam.ids import check_job_id, check_name

    assert check_job_id(msg.job_id) and check_name(msg.session)  # nothing taken names a path it should not
    assert isinstance(brief_problem(msg.text), str)


@FUZZ
@given(
    st.text(max_size=300)
    | st.lists(
        st.sampled_from(
            [
                "A=1",
                "export B='x'",
                'C="a\\"b"',
                "D",
                "=",
                'E="open',
                "#c",
                "F=a b",
                "MQTT_PASSWORD hunter2==",
                "G='",
                " H = v ",
                "I=\\u",
                "\x00=1",
            ]
        ),
        max_size=6,
    ).map("\n".join)
)
def test_the_env_file_parser_parses_or_says_which_line(text: str) -> None:
    try:
        entries = parse_env_text(text, source="f")
    except ConfigError as e:
        assert str(e).startswith("f:")
        return
    for entry in entries:
        assert entry.key and isinstance(entry.value, str)


@FUZZ
@given(
    st.text(max_size=400)
    | st.lists(
        st.sampled_from(
            [
                "[VERDICT: PASS]",
                "[VERDICT: NOT PASS]",
                "[verdict: pass]",
                "[ VERDICT :x]",
                "",
                "  ",
                "text",
                "[VERDICT:",
                "]",
            ]
        ),
        max_size=6,
    ).map("\n".join)
)
def test_the_verdict_parser_always_gives_a_verdict(text: str) -> None:
    verdict = parse_verdict(text)
    assert verdict.passed == (verdict.reason == "")
    if verdict.passed:
        assert text.strip().splitlines()[-1].strip() == "[VERDICT: PASS]"
