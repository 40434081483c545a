"""Test hygiene: a suite started in the background has SIGINT ignored, and a child inherits that; the
helpers that start processes a test later interrupts give them SIGINT's default back, so Ctrl-C (as a
test sends it) still ends them, and a test that waits for one kills it when the wait runs out."""

from __future__ import annotations

import signal
import subprocess
from collections.abc import Iterator

import pytest

from tests.helpers.mamcli import interrupt, spawn_mam


@pytest.fixture
def sigint_ignored() -> Iterator[None]:
    """As under `pytest ... &` from a non-interactive shell: SIGINT ignored, inherited by every child."""
    old = signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, old)


def test_a_spawned_mam_ends_on_sigint_even_when_the_suite_ignores_it(workspace, sigint_ignored) -> None:
    tail = spawn_mam("tail", env={"MAM_NO_AUTOSTART": "1"})
    try:
        # Interrupt it once it follows (its first line: no broker here, so it follows the registry), not while
        # it is still starting: a Ctrl-C that early ends it 130 before its handler is set up (a loaded machine).
        assert tail.stderr is not None
        first = tail.stderr.readline()
        assert "following the registry" in first, first
        with pytest.raises(subprocess.TimeoutExpired):
            tail.wait(timeout=1)  # it follows, and would forever
        assert interrupt(tail) == 130  # `mam tail` ends on Ctrl-C, 130 as every long-running command
    finally:
        if tail.poll() is None:
            tail.kill()
            tail.wait()
        for stream in (tail.stdout, tail.stderr):
            if stream is not None:
                stream.close()
