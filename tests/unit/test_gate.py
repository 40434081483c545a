"""The receiving gate: signature, job, sender, seq and size checks, and the disk/MQTT duplicate rule."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from mam.bus.envelope import Envelope
from mam.jobs.gate import EventGate

KEY = "k" * 64


def env(seq: int, type: str = "progress", sender: str = "agent", job: str = "j1", key: str = KEY, **body) -> bytes:
    return Envelope("event", job, seq, type, sender, 1000 + seq, body).signed(key).encode()


def test_accepts_in_order_and_reports_gaps() -> None:
    gate = EventGate("j1", KEY)
    assert gate.check(env(1)).accepted
    v = gate.check(env(4))
    assert v.accepted and v.gap == 2


def test_rejections_have_reasons() -> None:
    gate = EventGate("j1", KEY)
    assert gate.check(env(2)).accepted
    cases = {
        "bad_signature": env(3, key="wrong"),
        "wrong_job": env(3, job="j2"),
        "sender_not_allowed": env(3, type="completed", sender="heartbeater"),
        "replay": env(2),
        "out_of_order": env(1),
        "oversize": b"x" * (65 * 1024),
        "not_json": b"\x00\x01",
        "unknown_version": b'{"v":1}',
        "bad_shape": b'{"v":2,"kind":"event"}',
        "wrong_kind": Envelope("state", "j1", 3, "state", "wrapper", 1, {}).signed(KEY).encode(),
    }
    for reason, raw in cases.items():
        v = gate.check(raw)
        assert not v.accepted and v.reason == reason, (reason, v)
    assert gate.check(env(3)).accepted


def test_the_same_event_by_disk_and_mqtt_is_a_silent_duplicate_but_a_third_copy_is_a_replay() -> None:
    gate = EventGate("j1", KEY)
    raw = env(1)
    assert gate.check(raw, "disk").accepted
    dup = gate.check(raw, "mqtt")
    assert not dup.accepted and dup.silent and dup.reason == "duplicate"
    again = gate.check(raw, "mqtt")
    assert not again.accepted and not again.silent and again.reason == "replay"


def test_an_echo_noted_without_decoding_makes_the_next_mqtt_copy_a_replay() -> None:
    """An intake's own relay comes back over MQTT: noted by seq (`seen_on`), so a copy replayed later is a
    replay, as if the echo had been checked whole."""
    gate = EventGate("j1", KEY)
    raw = env(1)
    assert gate.check(raw, "disk").accepted
    gate.seen_on(1, "mqtt")
    gate.seen_on(7, "mqtt")  # never accepted: nothing to note
    again = gate.check(raw, "mqtt")
    assert not again.accepted and not again.silent and again.reason == "replay"
    assert gate.check(env(7), "mqtt").accepted


def test_a_non_ascii_signature_is_a_bad_signature_not_a_crash() -> None:
    """Found by tests/fuzz: hmac.compare_digest raised TypeError, which killed the wrapper (wrapper_error)."""
    gate = EventGate("j1", KEY)
    for sig in ("\x80", "é" * 64, "\u2603"):
        v = gate.check(Envelope("event", "j1", 1, "progress", "agent", 1, {}, sig=sig).encode())
        assert not v.accepted and v.reason == "bad_signature"
    assert gate.check(env(1)).accepted


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=2048))
def test_garbage_never_crashes_the_gate(data: bytes) -> None:
    v = EventGate("j1", KEY).check(data)
    assert not v.accepted and v.reason


@settings(max_examples=200, deadline=None)
@given(st.lists(st.integers(1, 30), max_size=30))
def test_accepted_seqs_strictly_increase(seqs: list[int]) -> None:
    gate = EventGate("j1", KEY)
    accepted = [s for s in seqs if gate.check(env(s)).accepted]
    assert accepted == sorted(set(accepted))
