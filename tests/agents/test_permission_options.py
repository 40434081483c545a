"""What each --permissions mode adds to a launch, per CLI (the values checked against the real
programs are in docs/agents.md); opencode's rule keeps the user's own bash setting."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from mam.agents import get_adapter
from mam.agents.base import LaunchContext


def ctx(tmp_path: Path, permissions: str = "report", **env: str) -> LaunchContext:
    return LaunchContext(
        session="s",
        cwd=str(tmp_path / "project"),
        state_dir=tmp_path / "state",
        permissions=permissions,
        env={"HOME": str(tmp_path / "h"), **env},
        mam_dir=tmp_path / "ws" / ".mam",
    )


@pytest.mark.parametrize("agent", ["claude", "codex", "opencode", "hermes", "grok", "agy", "demo"])
def test_ask_passes_no_permission_option(agent: str, tmp_path: Path) -> None:
    adapter = get_adapter(agent)
    options = adapter.session_options(ctx(tmp_path, "ask"))
    hooks = adapter.hook_options(ctx(tmp_path, "ask"))  # mam's lifecycle hooks: no permission either
    # hermes always gets its pinned HERMES_HOME (where mam looks for its sessions) and the BASH_ENV
    # that keeps the pane's PATH in its terminal tool, never a permission
    pinned = {"HERMES_HOME", "BASH_ENV"} if agent == "hermes" else set()
    assert options.args == (*adapter.session_args, *hooks.args)
    assert set(options.env) == pinned | set(hooks.env)


def test_codex_report_gives_its_sandbox_network_and_the_workspace_state_only(tmp_path: Path) -> None:
    args = get_adapter("codex").session_options(ctx(tmp_path)).args
    assert args == (
        "--no-daemon",
        "-c",
        "allow_login_shell=false",
        "-c",
        "sandbox_workspace_write.network_access=true",
        "-c",
        f'sandbox_workspace_write.writable_roots=["{tmp_path / "ws" / ".mam"}"]',
        *get_adapter("codex").hook_options(ctx(tmp_path)).args,  # `-c notify=[...]`: mam's turn-end hook
    )


def opencode_rule(tmp_path: Path, user: object | None = None, **env: str) -> object:
    if user is not None:
        folder = tmp_path / "h" / ".config" / "opencode"
        folder.mkdir(parents=True)
        (folder / "opencode.json").write_text(json.dumps(user) if not isinstance(user, str) else user)
    found = get_adapter("opencode").session_options(ctx(tmp_path, **env)).env.get("OPENCODE_CONFIG_CONTENT")
    return json.loads(found) if found else None


def test_opencode_report_carries_the_users_bash_setting_in(tmp_path: Path) -> None:
    assert opencode_rule(tmp_path) == {
        "permission": {"bash": {"*": "allow", "mam event *": "allow"}}
    }  # opencode's default


def test_opencode_report_keeps_a_user_ask(tmp_path: Path) -> None:
    rule = opencode_rule(tmp_path, {"permission": {"bash": "ask", "edit": "deny"}})
    assert rule == {"permission": {"bash": {"*": "ask", "mam event *": "allow"}}}


def test_opencode_report_keeps_user_patterns_and_puts_its_rule_last(tmp_path: Path) -> None:
    rule = opencode_rule(tmp_path, {"permission": {"bash": {"*": "ask", "git *": "allow"}}})
    assert list(rule["permission"]["bash"].items()) == [("*", "ask"), ("git *", "allow"), ("mam event *", "allow")]


def test_opencode_report_keeps_the_users_own_config_content(tmp_path: Path) -> None:
    rule = opencode_rule(tmp_path, OPENCODE_CONFIG_CONTENT=json.dumps({"model": "x/y", "permission": {"bash": "deny"}}))
    assert rule == {"model": "x/y", "permission": {"bash": {"*": "deny", "mam event *": "allow"}}}


@pytest.mark.parametrize("user", ["{ // jsonc\n}", {"permission": "ask"}])
def test_opencode_report_adds_nothing_when_it_cannot_keep_the_users_setting(tmp_path: Path, user: object) -> None:
    assert opencode_rule(tmp_path, user) is None


@pytest.mark.parametrize("agent", ["claude", "codex", "opencode", "hermes", "grok", "agy", "gemini", "demo"])
@pytest.mark.parametrize("permissions", ["ask", "report", "full"])
def test_only_a_sandboxed_codex_reaps_what_its_tool_commands_leave(agent: str, permissions: str) -> None:
    # codex 0.171's sandbox kills a tool command's leftovers; `full` turns the sandbox off
    expected = agent == "codex" and permissions != "full"
    assert get_adapter(agent).reaps_tool_processes(permissions) is expected
