"""The node's routed standard streams (mam/node/streams.py): a caller that has gone (its stream muted) must not
make the node's `sys.stderr` look binary to click, which probes it once and caches what it found for the whole
process: every later `echo(..., err=True)`, for every caller, then failed with "write() argument must be str, not
bytes" (found by the fault suite: delegations that failed right after registering their job)."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from mam.node.streams import Stream

SCRIPT = """
import os, click
from mam.node import streams
from mam.util import caller

streams.install()
_r, w = os.pipe()
gone = streams.Stream(w, "w")
gone.mute()
live_r, live_w = os.pipe()
live = streams.Stream(live_w, "w")

def of(err):
    return caller.Caller(environ={}, cwd="/", pid=1, ppid=1, stderr=err)

with caller.serving(of(gone)):
    click.echo("to a caller that has gone", err=True)
with caller.serving(of(live)):
    click.echo("to a live caller", err=True)
live.flush()
os.write(1, os.read(live_r, 100))
"""


def test_a_caller_gone_before_the_first_echo_leaves_the_next_callers_stderr_working() -> None:
    done = subprocess.run([sys.executable, "-c", SCRIPT], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert done.stdout == "to a live caller\n"


def test_a_muted_stream_drops_text_and_refuses_bytes_as_a_text_stream_does(tmp_path) -> None:
    stream = Stream(os.open(tmp_path / "out", os.O_WRONLY | os.O_CREAT, 0o600), "w")  # it owns the descriptor
    stream.mute()
    assert stream.write("dropped") == len("dropped")
    with pytest.raises(TypeError):
        stream.write(b"")  # type: ignore[arg-type]
    assert (tmp_path / "out").read_text() == ""


def test_a_delegation_whose_caller_cannot_be_told_its_job_lets_go_of_it(store) -> None:  # type: ignore[no-untyped-def]
    """The other half of that failure: `on_registered` raised after the job was registered, and the node held the
    job's owner for as long as it lived (the job `pending` for ever). Now this process lets go, and the next look
    (the monitor, the session's next job) closes it."""
    from mam.jobs.delegate import delegate, delegate_request
    from mam.jobs.ledger import owner_alive
    from mam.jobs.stale import close_if_abandoned
    from mam.settings import load_settings
    from mam.store import jobs as jobs_table
    from tests.helpers.jobs import registered_session

    ws, registry = store
    registered_session(ws.root, "w")

    def told(_job: object) -> None:
        raise TypeError("write() argument must be str, not bytes")

    req = delegate_request(target="w", brief="hello")
    with pytest.raises(TypeError):
        delegate(req, ws=ws, settings=load_settings(environ={}), registry=registry, on_registered=told)
    with registry.read() as conn:
        (row,) = jobs_table.open_jobs(conn)
    assert not owner_alive(row.owner)
    ended = close_if_abandoned(ws, registry, row.id, by="test")
    assert ended is not None and ended.reason == "wrapper_died"
