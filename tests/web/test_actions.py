"""The page's actions table: what each row offers (mam/web/actions.py)."""

from __future__ import annotations

import pytest

from mam.errors import LoopNotFound
from mam.settings import load_settings
from mam.web.actions import find, offered
from mam.workspace import Workspace


def test_a_loop_waiting_for_approval_offers_approve_and_no_other_loop_does() -> None:
    waiting = offered("loop", {"id": "loop-1", "state": "needs_approval"})
    assert [a["name"] for a in waiting] == ["approve"] and "loop-1" in waiting[0]["question"]
    for state in ("running", "approved", "passed", "not_passed", "failed"):
        assert offered("loop", {"id": "loop-1", "state": state}) == []


def test_approve_is_the_library_call_of_mam_loop_approve(tmp_path) -> None:  # type: ignore[no-untyped-def]
    """The same refusal as `mam loop approve` for a loop that does not exist (exit 5), nothing written."""
    action = find("loop", "approve")
    assert action is not None
    ws = Workspace(tmp_path)
    with pytest.raises(LoopNotFound) as refused:
        action.run(ws, load_settings(environ={}), "loop-20261202-000000-abcdef")
    assert refused.value.exit_code == 5 and not (tmp_path / ".mam").exists()
