"""Fixtures of the unit tests that need a registry on disk (no pane, no broker)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from mam.store.registry import Registry
from mam.workspace import Workspace


@pytest.fixture
def store(tmp_path: Path) -> Iterator[tuple[Workspace, Registry]]:
    """A workspace folder and its registry (closed after the test)."""
    ws = Workspace((tmp_path / "ws").resolve())
    ws.root.mkdir()
    registry = Registry(ws)
    try:
        yield ws, registry
    finally:
        registry.close()
