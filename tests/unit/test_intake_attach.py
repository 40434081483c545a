"""A job's events subscription must stand (a granted SUBACK) before anything is dispatched.

A NATS cluster under load (500 sessions, hundreds of jobs at once) refuses some SUBSCRIBEs: the SUBACK
says failure, the JetStream consumer behind it was not made; or it answers late. A remote job's events
come only over that subscription, so a dispatch made before it stands loses the runner's `delivered`,
`started` and `completed` (1,033 of 2,500 jobs ended agent_blocked in bench/multihost.py with refusals;
after refusals were asked again, 587 completed jobs still ended so, their SUBACKs over 30 s late). The
broker is a stand-in object: what is under test is the intake's rule.
"""

from __future__ import annotations

from typing import Any

import pytest

from mam.errors import BrokerError
from mam.jobs import intake as intake_mod
from mam.jobs.intake import Intake
from mam.store.registry import Registry
from mam.workspace import Workspace
from tests.helpers.jobs import register_delivered


class RefusingBroker:
    def __init__(self, refusals: int) -> None:
        self.refusals, self.asked = refusals, 0
        self.handlers: list[Any] = []
        self.waited: list[bool] = []

    def subscribe(self, topic: str, handler: Any, *, timeout: float = 5.0, qos: int = 1, wait: bool = True) -> bool:
        self.asked += 1
        self.handlers.append(handler)
        self.waited.append(wait)
        return not wait or self.asked > self.refusals


class SilentBroker:
    """Never acknowledges a subscription: MqttClient.subscribe raises once its timeout passes."""

    def subscribe(self, topic: str, handler: Any, *, timeout: float = 5.0, qos: int = 0, wait: bool = True) -> bool:
        raise BrokerError(f"MQTT broker n1 did not acknowledge a subscription within {timeout:.0f}s")


@pytest.fixture(autouse=True)
def quick(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(intake_mod, "SUBSCRIBE_RETRY_S", 0.01)


def test_a_refused_subscription_is_asked_again_until_granted(store: tuple[Workspace, Registry]) -> None:
    ws, registry = store
    intake = Intake(register_delivered(ws, registry, topic_prefix="t"), registry, local=False)
    broker = RefusingBroker(refusals=3)
    assert intake.attach(broker, "t/jobs/x/events", timeout=30) == ""  # type: ignore[arg-type]
    assert broker.asked == 4 and len(set(broker.handlers)) == 1  # one handler, asked again


def test_a_remote_job_whose_subscription_stays_refused_gets_a_problem(store: tuple[Workspace, Registry]) -> None:
    ws, registry = store
    intake = Intake(register_delivered(ws, registry, topic_prefix="t"), registry, local=False)
    problem = intake.attach(RefusingBroker(refusals=10**6), "t/jobs/x/events", timeout=0.2)  # type: ignore[arg-type]
    assert "refused the subscription" in problem


def test_a_local_job_asks_once_and_goes_on_by_its_disk_path(store: tuple[Workspace, Registry]) -> None:
    ws, registry = store
    ledger = register_delivered(ws, registry, topic_prefix="t")
    intake = Intake(ledger, registry, local=True)
    broker = RefusingBroker(refusals=10**6)
    assert intake.attach(broker, "t/jobs/x/events", timeout=0.2) == ""  # type: ignore[arg-type]
    assert broker.asked == 1 and broker.waited == [False]  # no wait for a SUBACK: the client asks again by itself


def test_a_remote_job_whose_subscription_is_never_acknowledged_is_not_dispatched(
    store: tuple[Workspace, Registry],
) -> None:
    ws, registry = store
    ledger = register_delivered(ws, registry, topic_prefix="t")
    intake = Intake(ledger, registry, local=False)
    problem = intake.attach(SilentBroker(), "t/jobs/x/events", timeout=0.2)  # type: ignore[arg-type]
    assert "does not stand" in problem and "did not acknowledge" in problem
