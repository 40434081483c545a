"""Loop fixtures: a workspace that is a git repository, wired to a real broker, with fast timings.

End-to-end loop scenarios run against Mosquitto only (`loop_ws`), to keep CI fast; the
smoke test uses `wired` from tests/e2e (marked `real_brokers`: amqtt and Mosquitto) through `loop_ws_any`.
"""

from __future__ import annotations

import pytest

from tests.e2e.conftest import wired  # noqa: F401  (re-exported fixture)
from tests.helpers.jobs import FAST
from tests.loop.gitrepo import make_repo


@pytest.fixture
def wired_mosquitto(workspace, mosquitto_broker, monkeypatch):
    """Like tests/e2e's `wired`, against Mosquitto only."""
    for key, value in {**mosquitto_broker.env(), **FAST}.items():
        monkeypatch.setenv(key, value)
    return workspace


@pytest.fixture
def loop_ws(wired_mosquitto):
    """A git workspace (branch main, one commit) on Mosquitto."""
    make_repo(wired_mosquitto.root)
    return wired_mosquitto


@pytest.fixture
def loop_ws_any(wired):  # noqa: F811
    """A git workspace on `broker` (the double, or amqtt and Mosquitto for a test marked `real_brokers`)."""
    make_repo(wired.root)
    return wired
