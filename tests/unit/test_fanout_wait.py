"""How `mam job fanout` waits for its branches (mam.jobs.fanout): woken by each branch's end, and a Ctrl-C in
the waiting thread is the fan-out's interrupt (never a RuntimeError from a lock released twice)."""

from __future__ import annotations

import os
import signal
import threading
from pathlib import Path

import pytest

from mam.errors import FanoutInterrupted
from mam.jobs.delegate import DelegateRequest
from mam.jobs.fanout import fanout
from mam.jobs.result import Outcome
from mam.workspace import Workspace


def _completed(req: DelegateRequest) -> Outcome:
    return Outcome(req.job_id, "completed", "completed", 0, result=f"done by {req.target}\nyes")


def test_all_waits_for_every_branch_and_keeps_their_order_of_ending(tmp_path: Path) -> None:
    late = threading.Event()

    def delegator(req: DelegateRequest) -> Outcome:
        if req.target == "slow":
            assert late.wait(30)
        else:
            late.set()  # "slow" ends only after "quick" did
        return _completed(req)

    out = fanout(["slow", "quick"], "hi", aggregate="all", ws=Workspace(tmp_path), delegator=delegator)
    assert (out.decided, out.outcome) == (True, "completed")
    assert [b.target for b in out.branches] == ["slow", "quick"]
    assert [b.state for b in out.branches] == ["completed", "completed"]


def test_a_branch_that_raises_is_recorded_and_the_others_go_on(tmp_path: Path) -> None:
    def delegator(req: DelegateRequest) -> Outcome:
        if req.target == "bad":
            raise RuntimeError("no such luck")
        return _completed(req)

    out = fanout(["bad", "good"], "hi", aggregate="vote", ws=Workspace(tmp_path), delegator=delegator)
    bad, good = out.branches
    assert (bad.state, bad.error) == ("error", "no such luck")
    assert (good.state, good.vote) == ("completed", "yes")


@pytest.mark.parametrize("aggregate", ["all", "first"])
def test_ctrl_c_while_waiting_is_the_fanouts_interrupt(tmp_path: Path, aggregate: str) -> None:
    if threading.current_thread() is not threading.main_thread():
        pytest.skip("signals reach the main thread only")
    release = threading.Event()
    started = threading.Barrier(3)

    def delegator(req: DelegateRequest) -> Outcome:
        started.wait(30)
        release.wait(60)
        return _completed(req)

    def interrupt() -> None:
        started.wait(30)
        os.kill(os.getpid(), signal.SIGINT)

    before = signal.signal(signal.SIGINT, signal.default_int_handler)
    sender = threading.Thread(target=interrupt, daemon=True)
    try:
        sender.start()
        with pytest.raises(FanoutInterrupted, match="the jobs stay open"):
            fanout(["a", "b"], "hi", aggregate=aggregate, ws=Workspace(tmp_path), delegator=delegator)
    finally:
        release.set()
        sender.join(30)
        signal.signal(signal.SIGINT, before)
