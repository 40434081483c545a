"""The signed envelope: canonical JSON, HMAC-SHA256 with the job token, and every decode refusal.

MESSAGING.md is the spec these tests hold the code to (its worked example is checked here
byte for byte, and again from the markdown itself in test_messaging_doc.py).
"""

from __future__ import annotations

import hashlib
import hmac
import json
import re
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from mam.bus.envelope import MAX_DEPTH, MAX_EVENT_BYTES, VERSION, Envelope, canonical, sign
from mam.errors import DecodeError

MESSAGING = Path(__file__).resolve().parents[2] / "MESSAGING.md"
KEY = "9c1f2e3d4b5a69788796a5b4c3d2e1f00f1e2d3c4b5a69788796a5b4c3d2e1f0"  # the worked example's token
EXAMPLE = Envelope(
    kind="event",
    job="job-5f2c0e9a7b3d4e61",
    seq=7,
    type="completed",
    sender="agent",
    ts=1767225600000,
    body={
        "message": "Done: 12 tests pass ✓",
        "report": '# Report\n\tnaïve "café" — ok',
        "report_path": "/work/ws/report.md",
    },
)


def wire(**changes: Any) -> bytes:
    """A valid signed message as JSON text, with some top-level fields replaced (None: removed)."""
    obj = EXAMPLE.signed(KEY).as_dict()
    for name, value in changes.items():
        if value is None:
            obj.pop(name, None)
        else:
            obj[name] = value
    return json.dumps(obj, ensure_ascii=False).encode("utf-8")


def reason(raw: bytes | str) -> str:
    with pytest.raises(DecodeError) as info:
        Envelope.decode(raw)
    return info.value.reason


def doc_block(name: str) -> str:
    text = MESSAGING.read_text(encoding="utf-8")
    m = re.search(rf"<!-- example:{name} -->\s*```[a-z]*\n(.*?)\n```", text, re.S)
    assert m, f"MESSAGING.md has no example:{name} block"
    return m.group(1)


# -- signing ------------------------------------------------------------------------------------
def test_sign_verify_round_trip() -> None:
    signed = EXAMPLE.signed(KEY)
    assert re.fullmatch(r"[0-9a-f]{64}", signed.sig)
    back = Envelope.decode(signed.encode())
    assert back == signed
    assert back.verify(KEY)


def test_the_key_is_the_token_text_and_the_signature_is_hex_hmac_sha256_of_the_canonical_bytes() -> None:
    data = canonical(EXAMPLE.unsigned())
    assert EXAMPLE.signed(KEY).sig == hmac.new(KEY.encode("utf-8"), data, hashlib.sha256).hexdigest()
    # Not the 32 bytes the hex token spells: that would be another key.
    assert EXAMPLE.signed(KEY).sig != hmac.new(bytes.fromhex(KEY), data, hashlib.sha256).hexdigest()


@pytest.mark.parametrize(
    "change",
    [
        {"job": "job-5f2c0e9a7b3d4e62"},
        {"seq": 8},
        {"type": "error"},
        {"sender": "heartbeater"},
        {"ts": 1767225600001},
        {"kind": "state"},
        {"body": {"message": "Done: 12 tests pass ✓"}},
        {"body": {**EXAMPLE.body, "message": "Done: 13 tests pass ✓"}},
        {"body": {**EXAMPLE.body, "extra": 1}},
    ],
)
def test_any_change_to_any_field_breaks_the_signature(change: dict[str, Any]) -> None:
    signed = EXAMPLE.signed(KEY)
    tampered = replace(signed, **change)
    assert not tampered.verify(KEY)
    # Also through the wire: edit the JSON, keep the old signature.
    assert not Envelope.decode(wire(**change, sig=signed.sig)).verify(KEY)


def test_wrong_or_missing_key_or_signature_fails() -> None:
    signed = EXAMPLE.signed(KEY)
    assert not signed.verify(KEY[:-1] + "1")
    assert not signed.verify(KEY.upper())
    assert not signed.verify("")
    assert not replace(signed, sig="").verify(KEY)
    assert not replace(signed, sig=signed.sig.upper()).verify(KEY)


def test_verification_uses_the_canonical_form_not_the_received_bytes() -> None:
    signed = EXAMPLE.signed(KEY)
    pretty = json.dumps(
        signed.as_dict(), indent=2, ensure_ascii=True
    ).encode()  # other spacing, \u escapes, other order
    assert Envelope.decode(pretty).verify(KEY)


# -- the canonical form -------------------------------------------------------------------------
def test_canonical_form_is_byte_identical_to_the_messaging_md_example() -> None:
    data = canonical(EXAMPLE.unsigned())
    assert data == doc_block("canonical").encode("utf-8")
    assert sign(KEY, data) == doc_block("signature")
    assert EXAMPLE.signed(KEY).encode() == doc_block("wire").encode("utf-8")
    assert doc_block("key") == KEY


def test_escaping_is_json_dumps_ensure_ascii_false() -> None:
    text = '\x00\x1f\x7f\u2028/\\"\b\f\n\r\t\U0001f600é'
    expected = '"\\u0000\\u001f\x7f\u2028/\\\\\\"\\b\\f\\n\\r\\t\U0001f600é"'
    assert canonical({"s": text}) == ('{"s":' + expected + "}").encode("utf-8")


def test_keys_sort_by_code_point_at_every_level() -> None:
    obj = {"b": {"z": 1, "Z": 2, "é": 3, "\uffff": 4, "\U0001f600": 5}, "a": [{"y": 1, "x": 2}]}
    # Code point order puts U+FFFF before U+1F600 (UTF-16 order, as in RFC 8785, would not).
    assert canonical(obj) == '{"a":[{"x":2,"y":1}],"b":{"Z":2,"z":1,"é":3,"\uffff":4,"\U0001f600":5}}'.encode("utf-8")


def test_numbers_and_literals() -> None:
    assert canonical({"n": [0, -1, 2**53 - 1, True, False, None]}) == b'{"n":[0,-1,9007199254740991,true,false,null]}'
    for big in (2**53, -(2**53), 10**20):  # not exact in every JSON reader, nor storable in SQLite past 2^63
        with pytest.raises(DecodeError):
            canonical({"n": [big]})
    minus_zero = Envelope.decode(wire(body={"n": "@"}).replace(b'"@"', b"-0"))
    assert minus_zero.body == {"n": 0} and b'"n":0' in canonical(minus_zero.unsigned())  # -0 is the integer 0


@pytest.mark.parametrize(
    "body", [{"x": 1.5}, {"x": [1, {"y": float("nan")}]}, {"x": float("inf")}, {"x": "\ud800"}, {"\udcff": 1}]
)
def test_a_sender_cannot_sign_what_a_receiver_would_refuse(body: dict[str, Any]) -> None:
    with pytest.raises(DecodeError):
        replace(EXAMPLE, body=body).signed(KEY)


def test_a_sender_cannot_sign_nesting_deeper_than_the_limit() -> None:
    body: Any = 1
    for _ in range(MAX_DEPTH - 2):  # the envelope is level 1, body level 2, these lists 3..MAX_DEPTH
        body = [body]
    replace(EXAMPLE, body={"x": body}).signed(KEY)
    with pytest.raises(DecodeError):
        replace(EXAMPLE, body={"x": [body]}).signed(KEY)


# -- decode refusals ----------------------------------------------------------------------------
@pytest.mark.parametrize(
    "raw, expected",
    [
        # floats and non-finite numbers, anywhere
        (wire(seq=1.0), "bad_shape"),
        (wire(body={"x": 1.5}), "bad_shape"),
        (wire(body={"x": [1e3]}), "bad_shape"),
        (wire(body={"x": -0.0}), "bad_shape"),
        (wire(ts=1767225600000.0), "bad_shape"),
        (wire(body={"x": float("nan")}), "bad_shape"),
        (wire(body={"x": float("inf")}), "bad_shape"),
        (wire(body={"x": float("-inf")}), "bad_shape"),
        # not an object
        (b"[]", "bad_shape"),
        (b'"event"', "bad_shape"),
        (b"1", "bad_shape"),
        (b"null", "bad_shape"),
        (b"true", "bad_shape"),
        # protocol version
        (wire(v=1), "unknown_version"),
        (wire(v=3), "unknown_version"),
        (wire(v=0), "unknown_version"),
        (wire(v="2"), "unknown_version"),
        (wire(v=True), "unknown_version"),
        (wire(v=None), "unknown_version"),
        (wire(v=2.0), "bad_shape"),
        # extra or missing fields
        (wire(extra=1), "bad_shape"),
        (wire(Sig="x"), "bad_shape"),
        (wire(sig=None), "bad_shape"),
        (wire(body=None), "bad_shape"),
        (wire(job=None), "bad_shape"),
        (wire(ts=None), "bad_shape"),
        # wrong types and ranges
        (wire(seq="7"), "bad_shape"),
        (wire(seq=True), "bad_shape"),
        (wire(ts=False), "bad_shape"),
        (wire(body=[]), "bad_shape"),
        (wire(body="x"), "bad_shape"),
        (wire(sig=7), "bad_shape"),
        (wire(type=1), "bad_shape"),
        (wire(sender=[]), "bad_shape"),
        (wire(kind="gossip"), "bad_shape"),
        (wire(seq=-1), "bad_shape"),
        (wire(ts=-1), "bad_shape"),
        (wire(job=""), "bad_shape"),
        (wire(job="j" * 129), "bad_shape"),
        # not JSON, not UTF-8, not Unicode
        (b"", "not_json"),
        (b"{", "not_json"),
        (wire() + b"x", "not_json"),
        (b"\xef\xbb\xbf" + wire(), "not_json"),
        (wire().replace(b"caf\xc3\xa9", b"caf\xe9"), "not_json"),
        (b"\xff\xfe{\x00}\x00", "not_json"),
        (wire(body={"x": "\\ud800"}).replace(b"\\\\ud800", b"\\ud800"), "not_json"),
        (b"[" * 5000 + b"]" * 5000, "not_json"),
    ],
    ids=lambda v: repr(v)[:60] if isinstance(v, bytes) else str(v),
)
def test_decode_refuses_with_the_documented_reason(raw: bytes, expected: str) -> None:
    assert reason(raw) == expected


def test_checks_run_in_the_documented_order() -> None:
    assert reason(b" " * (MAX_EVENT_BYTES + 1)) == "oversize"  # size before parsing
    assert reason(b'{"v":1.5,"x":') == "bad_shape"  # a float stops the parse before the syntax error after it
    assert reason(b"[1.5]") == "bad_shape"
    assert reason(wire(v=1, extra=1, seq="x")) == "unknown_version"  # the version before the other fields
    assert (
        reason(wire(extra=1, body={"x": "\\ud800"}).replace(b"\\\\ud800", b"\\ud800")) == "bad_shape"
    )  # fields before text


def test_nesting_up_to_the_limit_decodes_and_deeper_is_refused_at_any_depth() -> None:
    def message(levels: int) -> bytes:  # `levels` arrays inside body's "x"
        return wire(body={"x": "@"}).replace(b'"@"', b"[" * levels + b"]" * levels)

    ok = Envelope.decode(message(MAX_DEPTH - 2))  # envelope 1 + body 2 + arrays
    assert ok.signed(KEY).verify(KEY)
    for levels in (MAX_DEPTH - 1, 100, 900, 990, 2000):
        assert reason(message(levels)) in ("bad_shape", "not_json")


def test_size_limit_is_in_bytes_and_inclusive() -> None:
    base = wire(body={"message": ""})
    fill = MAX_EVENT_BYTES - len(base)
    exact = wire(body={"message": "é" * (fill // 2) + "x" * (fill % 2)})
    assert len(exact) == MAX_EVENT_BYTES
    Envelope.decode(exact)
    Envelope.decode(exact.decode("utf-8"))  # text is measured as its UTF-8 bytes
    assert reason(exact[:-1] + b" }") == "oversize"  # one byte more
    assert reason(exact.decode("utf-8")[:-1] + " }") == "oversize"
    assert reason(b" " * (MAX_EVENT_BYTES + 1)) == "oversize"  # checked before anything else


def test_version_constant_is_two() -> None:
    assert VERSION == 2  # 2: a dispatch carries a key nonce instead of the job token


# -- properties ---------------------------------------------------------------------------------
json_leaves = (
    st.none() | st.booleans() | st.integers(-(2**53) + 1, 2**53 - 1) | st.text(max_size=40)
)  # text: any code point but surrogates
json_values = st.recursive(
    json_leaves,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=10), inner, max_size=4),
    max_leaves=25,
)


def depth(value: Any) -> int:
    if isinstance(value, dict):
        return 1 + max((depth(v) for v in value.values()), default=0)
    if isinstance(value, list):
        return 1 + max((depth(v) for v in value), default=0)
    return 0


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    body=st.dictionaries(st.text(max_size=12), json_values, max_size=6),
    seq=st.integers(0, 2**53 - 1),
    ts=st.integers(0, 2**53 - 1),
    job=st.from_regex(r"[A-Za-z0-9._-]{1,128}", fullmatch=True),
    type=st.text(max_size=20),
    sender=st.text(max_size=20),
)
def test_random_bodies_round_trip_and_verify(
    body: dict[str, Any], seq: int, ts: int, job: str, type: str, sender: str
) -> None:
    assume(depth(body) + 1 <= MAX_DEPTH)  # + the envelope's own level
    env = Envelope(kind="event", job=job, seq=seq, type=type, sender=sender, ts=ts, body=body).signed(KEY)
    raw = env.encode()
    assume(len(raw) <= MAX_EVENT_BYTES)
    back = Envelope.decode(raw)
    assert back == env
    assert back.verify(KEY)
    assert back.encode() == raw
    assert not back.verify(KEY + "x")


@settings(max_examples=500, deadline=None)
@given(st.binary(max_size=4096))
def test_random_bytes_raise_nothing_but_decode_error(data: bytes) -> None:
    try:
        env = Envelope.decode(data)
    except DecodeError as e:
        assert e.reason in {"oversize", "not_json", "bad_shape", "unknown_version"}
        return
    assert env.verify(KEY) in (True, False)


any_json = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=10),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=6), inner, max_size=3),
    max_leaves=15,
)


@settings(max_examples=300, deadline=None)
@given(
    st.dictionaries(
        st.sampled_from(["v", "kind", "job", "seq", "type", "sender", "ts", "body", "sig", "x"]), any_json, max_size=9
    )
)
def test_random_json_objects_raise_nothing_but_decode_error(obj: dict[str, Any]) -> None:
    try:
        env = Envelope.decode(json.dumps(obj, ensure_ascii=False))
    except DecodeError:
        return
    assert env.verify(KEY) in (True, False)


@settings(max_examples=300, deadline=None)
@given(st.integers(0, 313), st.integers(0, 255))
def test_flipping_any_byte_of_a_signed_message_is_refused_or_fails_verification(position: int, value: int) -> None:
    raw = bytearray(EXAMPLE.signed(KEY).encode())
    assume(raw[position % len(raw)] != value)
    raw[position % len(raw)] = value
    try:
        env = Envelope.decode(bytes(raw))
    except DecodeError:
        return
    # Accepted only if the edit did not change what was signed nor the signature (e.g. a hex digit case).
    if env.verify(KEY):
        assert env.unsigned() == EXAMPLE.unsigned() and env.sig == EXAMPLE.signed(KEY).sig
