"""The origin's look for a runner's presence when the broker is slow to acknowledge subscriptions.

A NATS cluster that has just lost a node can hold a new subscription's SUBACK for more than 5 s
(docs/broker.md). The look must then be asked again within the job's dispatch wait instead of ending
the delegation at once; only a broker that never answers within the wait is a BrokerError (exit 3).
The broker here is a stand-in object: what is under test is the origin's rule, not the wire.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest

from mam.bus.envelope import Envelope
from mam.bus.topics import Topics
from mam.errors import BrokerError
from mam.jobs.target import parse_target
from mam.remote import dispatch
from mam.remote.dispatch import RemoteDelivery
from mam.settings import load_settings
from mam.workspace import Workspace

SECRET = "s" * 32


class SlowBroker:
    """Leaves the first `unanswered` subscriptions without a SUBACK, then answers with the retained presence."""

    def __init__(self, unanswered: int, presence: bytes) -> None:
        self.unanswered, self.presence = unanswered, presence
        self.subscribed = self.unsubscribed = 0

    refuse = False  # answer the first ones with a SUBACK that says failure, instead of no SUBACK

    def subscribe(self, topic: str, handler: Any, *, timeout: float = 5.0, qos: int = 1) -> bool:
        self.subscribed += 1
        if self.subscribed <= self.unanswered:
            if self.refuse:
                return False
            raise BrokerError(f"MQTT broker test did not acknowledge a subscription within {timeout:.0f}s")
        handler(topic, self.presence, True)
        return True

    def unsubscribe(self, topic: str, handler: Any = None, **_: Any) -> None:
        self.unsubscribed += 1


def presence(kind: str = "online", runner: str = "far", ts: int | None = None) -> bytes:
    body = {"runner": runner, "host": "h", "pid": 1, "workspace": "/w", "sessions": ["w"]}
    now = int(time.time() * 1000) if ts is None else ts
    env = Envelope(kind="presence", job=runner, seq=0, type=kind, sender="runner", ts=now, body=body)
    return env.signed(SECRET).encode()


def delivery(tmp_path: Path, broker: SlowBroker) -> RemoteDelivery:
    settings = load_settings(env_file=None, environ={"MAM_DISPATCH_SECRET": SECRET})
    return RemoteDelivery(
        parse_target("remote:far/w"),
        ws=Workspace(tmp_path),
        settings=settings,
        client=broker,  # type: ignore[arg-type]
        topics=Topics("mam/test"),
        brief="x",
    )


@pytest.fixture(autouse=True)
def quick(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(dispatch, "PRESENCE_WAIT_S", 0.03)
    monkeypatch.setattr(dispatch, "OFFLINE_POLL_S", 0.01)


def test_a_look_left_unanswered_is_asked_again_within_the_dispatch_wait(tmp_path: Path) -> None:
    broker = SlowBroker(unanswered=dispatch.PRESENCE_READS * 2, presence=presence())
    assert delivery(tmp_path, broker).find_target(wait_s=30.0) == ""
    assert broker.subscribed == dispatch.PRESENCE_READS * 2 + 1
    assert broker.unsubscribed == broker.subscribed  # no subscription is left behind, answered or not


def test_a_broker_that_never_answers_within_the_wait_is_a_broker_error(tmp_path: Path) -> None:
    broker = SlowBroker(unanswered=10**6, presence=presence())
    with pytest.raises(BrokerError, match="refused or did not acknowledge 3 of 3 subscriptions"):
        delivery(tmp_path, broker).find_target(wait_s=0.2)
    assert broker.unsubscribed == broker.subscribed


def test_one_read_answered_is_enough_even_when_others_were_not(tmp_path: Path) -> None:
    broker = SlowBroker(unanswered=1, presence=presence("offline"))
    problem = delivery(tmp_path, broker).find_target(wait_s=0.0)
    assert "is offline" in problem


def test_refused_subscriptions_are_asked_again_too(tmp_path: Path) -> None:
    broker = SlowBroker(unanswered=dispatch.PRESENCE_READS + 1, presence=presence())
    broker.refuse = True
    assert delivery(tmp_path, broker).find_target(wait_s=30.0) == ""
    assert broker.subscribed == dispatch.PRESENCE_READS + 2


def test_a_presence_counts_only_for_the_runner_it_names_and_only_while_fresh(tmp_path: Path) -> None:
    """Issue 39, item 10: runner `near`'s signed presence, replayed on `far`'s topic by a broker user, made the
    origin dispatch to `far` (which does not exist): the job ended agent_blocked after its start deadline."""
    replayed = SlowBroker(unanswered=0, presence=presence(runner="near"))
    problem = delivery(tmp_path, replayed).find_target(wait_s=30.0)
    assert "has never announced itself" in problem  # at once: target_not_found, no dispatch wait
    stale = SlowBroker(unanswered=0, presence=presence(ts=int(time.time() * 1000) - 301_000))
    started = time.monotonic()
    assert "last said it is online 301s ago" in delivery(tmp_path, stale).find_target(wait_s=0.2)
    assert time.monotonic() - started >= 0.2  # waited like for an offline runner, then refused
    assert delivery(tmp_path, SlowBroker(unanswered=0, presence=presence())).find_target(wait_s=30.0) == ""
