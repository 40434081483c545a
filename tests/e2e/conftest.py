"""End-to-end fixtures: a workspace wired to a broker (the in-memory double, or real ones), fast timings."""

from __future__ import annotations

import pytest

from tests.helpers.jobs import FAST


@pytest.fixture
def wired(workspace, broker, monkeypatch):
    """A workspace whose mam talks to `broker` (the double; marked `real_brokers`: amqtt and Mosquitto), with short
    poll intervals."""
    for key, value in {**broker.env(), **FAST}.items():
        monkeypatch.setenv(key, value)
    return workspace
