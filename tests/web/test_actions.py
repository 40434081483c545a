"""The page's actions table: what each row offers (mam/web/actions.py)."""

from __future__ import annotations

import pytest

from mam.errors import LoopNotFound, SessionNotFound, SessionRefused, UsageError
from mam.settings import load_settings
from mam.web.actions import Asked, find, offered
from mam.workspace import Workspace


def test_a_loop_waiting_for_approval_offers_approve_and_reject_and_no_other_loop_does() -> None:
    waiting = offered("loop", {"id": "loop-1", "state": "needs_approval"})
    assert [a["name"] for a in waiting] == ["approve", "reject"] and "loop-1" in waiting[0]["question"]
    assert [a["note"] for a in waiting] == [False, True]  # a rejection asks for its note
    for state in ("running", "approved", "passed", "not_passed", "failed"):
        assert offered("loop", {"id": "loop-1", "state": state}) == []


def test_approve_is_the_library_call_of_mam_loop_approve(tmp_path) -> None:  # type: ignore[no-untyped-def]
    """The same refusal as `mam loop approve` for a loop that does not exist (exit 5), nothing written."""
    action = find("loop", "approve")
    assert action is not None
    ws = Workspace(tmp_path)
    with pytest.raises(LoopNotFound) as refused:
        action.run(ws, load_settings(environ={}), "loop-20261202-000000-abcdef", Asked())
    assert refused.value.exit_code == 5 and not (tmp_path / ".mam").exists()


def test_reject_needs_a_note_and_is_the_library_call_of_mam_loop_reject(tmp_path) -> None:  # type: ignore[no-untyped-def]
    action = find("loop", "reject")
    assert action is not None
    ws = Workspace(tmp_path)
    with pytest.raises(UsageError):
        action.run(ws, load_settings(environ={}), "loop-20261202-000000-abcdef", Asked({"note": "  "}))
    with pytest.raises(LoopNotFound):
        action.run(ws, load_settings(environ={}), "loop-20261202-000000-abcdef", Asked({"note": "add a test"}))
    assert not (tmp_path / ".mam").exists()


def test_pause_and_resume_are_offered_by_the_jobs_state_and_the_hold_by_the_workspaces() -> None:
    assert [a["name"] for a in offered("job", {"id": "job-1", "state": "running"})] == ["cancel", "pause"]
    assert [a["name"] for a in offered("job", {"id": "job-1", "state": "paused"})] == ["cancel", "resume"]
    assert offered("job", {"id": "job-1", "state": "completed"}) == []
    assert [a["name"] for a in offered("workspace", {"id": "all", "held": False})] == ["pause"]
    assert [a["name"] for a in offered("workspace", {"id": "all", "held": True})] == ["resume"]


def test_a_session_waiting_on_a_prompt_mam_can_read_offers_allow_and_deny_for_that_tool() -> None:
    tool = "Bash(touch /tmp/x)"
    row = {"name": "dev-1", "agent": "claude", "state": "waiting", "waiting_tool": tool}
    got = offered("session", row)
    assert [a["name"] for a in got] == ["allow", "deny"]
    assert all(a["body"] == {"tool": tool} and tool in a["question"] and "dev-1" in a["question"] for a in got)
    assert offered("session", {**row, "state": "working"}) == []
    assert offered("session", {**row, "waiting_tool": ""}) == []  # waiting, but not on a prompt mam saw
    assert offered("session", {**row, "agent": "codex"}) == []  # no captured prompt mam reads: answered in the pane


def test_an_answer_checks_the_session_and_the_tool_before_anything(tmp_path) -> None:  # type: ignore[no-untyped-def]
    allow = find("session", "allow")
    assert allow is not None
    ws, settings = Workspace(tmp_path), load_settings(environ={})
    with pytest.raises(SessionNotFound):
        allow.run(ws, settings, "dev-1", Asked({"tool": "Bash(ls)"}))
    with pytest.raises(SessionRefused):
        find("session", "deny").run(ws, settings, "dev-1", Asked({"tool": 7}))  # type: ignore[union-attr]
    assert not (tmp_path / ".mam").exists()
