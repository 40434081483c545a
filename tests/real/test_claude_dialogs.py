"""Claude Code 2.1.332's dialogs at launch for a user's own settings, with the real program
(docs/agents.md, "Dialogs at launch"; the screens are in tests/agents/screens/claude-2.1.332/).

A user in Manual mode (`permissions.defaultMode: "default"` in ~/.claude/settings.json) is asked
once "Make auto mode your default permission mode?" by a plain `claude`: mam's launch repeats that
mode in the session's own --settings file, so the session starts in Manual mode, unasked, and a job
completes. A first start (onboarding not done) shows a theme picker no per-session setting avoids:
create fails with one line naming it.
"""

from __future__ import annotations

import json

from mam.util.poll import wait_for
from tests.real.conftest import Rig, skip_module_without
from tests.real.test_claude import assert_completed, brief_text, delegate

skip_module_without("claude")

NUDGE = "Make auto mode your default permission mode?"


def user_settings(rig: Rig, settings: dict[str, object]) -> str:
    folder = rig.home / ".claude"
    folder.mkdir(exist_ok=True)
    text = json.dumps(settings)
    (folder / "settings.json").write_text(text)
    return text


def test_a_user_in_manual_mode_gets_a_session_in_manual_mode_and_a_job_completes(claude_rig: Rig) -> None:
    rig = claude_rig
    mine = user_settings(rig, {"permissions": {"defaultMode": "default"}})
    row = rig.create("manual-1")
    assert row["status"] == "running", row
    rc, record, err = delegate(rig, "manual-1", brief_text("manual"))
    assert_completed(rig, rc, record, err, row["pane_id"])
    screen = rig.screen(row["pane_id"])
    assert NUDGE not in screen and "manual mode on" in screen, rig.shown(row["pane_id"])
    # Nobody answered the nudge (Claude records an answer in ~/.claude.json); the user's settings are as written.
    assert "hasSeenAutoDefaultNudge" not in json.loads((rig.home / ".claude.json").read_text())
    assert (rig.home / ".claude" / "settings.json").read_text() == mine
    session_settings = json.loads((rig.ws.session_dir("manual-1") / "claude-settings.json").read_text())
    assert session_settings["permissions"] == {"defaultMode": "default"}

    # A resume launches with the same per-session settings: not asked either, and a second job completes.
    rig.mam_json("session", "stop", "--session", "manual-1")
    wait_for(lambda: not rig.pane_alive(row["pane_id"]), timeout=30, message="claude did not exit on stop")
    resumed = rig.mam_json("session", "resume", "--session", "manual-1")
    rc, record, err = delegate(rig, "manual-1", brief_text("manual-again"))
    assert_completed(rig, rc, record, err, resumed["pane_id"])
    screen = rig.screen(resumed["pane_id"])
    assert NUDGE not in screen and "manual mode on" in screen, rig.shown(resumed["pane_id"])


def test_a_first_start_fails_the_create_with_one_line_naming_the_theme_picker(claude_rig: Rig) -> None:
    rig = claude_rig
    state = rig.home / ".claude.json"
    state.write_text(json.dumps({**json.loads(state.read_text()), "hasCompletedOnboarding": False}))
    proc = rig.mam("session", "create", "--agent", "claude", "--role", "developer", "--session", "first-1")
    rig.sessions.append("first-1")
    assert proc.returncode == 1, (proc.returncode, proc.stdout, proc.stderr)
    assert "'Choose the text style that looks best with your terminal'" in proc.stderr, proc.stderr
    assert f"run `claude` once yourself in a terminal in {rig.ws.root.resolve()}" in proc.stderr, proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1, proc.stderr
    rows = rig.mam_json("session", "status")
    assert all(r["name"] != "first-1" or r["status"] != "running" for r in rows), rows
