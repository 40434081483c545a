"""MCP fixtures: a workspace wired to a real Mosquitto (as the loop tests), fast timings, demo agents."""

from __future__ import annotations

import pytest

from tests.e2e.conftest import wired  # noqa: F401  (re-exported fixture)
from tests.helpers.jobs import FAST


@pytest.fixture
def mcp_ws(workspace, mosquitto_broker, monkeypatch):
    """A workspace whose mam (and its MCP server) talks to Mosquitto, with short poll intervals."""
    for key, value in {**mosquitto_broker.env(), **FAST}.items():
        monkeypatch.setenv(key, value)
    return workspace
