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
    # opencode always gets its delivery channel (its server on loopback, behind a secret), never a permission
    channel: tuple[str, ...] = ()
    if agent == "opencode":
        pinned = {"OPENCODE_SERVER_PASSWORD", "OPENCODE_SERVER_USERNAME"}
        channel = options.args[-5:]
        assert channel[::2] == ("--port", "--hostname", "--mdns=false") and channel[3] == "127.0.0.1", channel
    assert options.args == (*adapter.session_args, *hooks.args, *channel)
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


def _board(tmp_path: Path, permissions: str = "report") -> LaunchContext:
    base = ctx(tmp_path, permissions)
    return LaunchContext(
        session=base.session,
        cwd=base.cwd,
        state_dir=base.state_dir,
        permissions=permissions,
        env=base.env,
        mam_dir=base.mam_dir,
        board=True,
    )


def test_report_allows_mam_event_only_and_board_adds_mam_board(tmp_path: Path) -> None:
    claude, grok = get_adapter("claude"), get_adapter("grok")
    assert claude.report_options(ctx(tmp_path)).args == ("--allowedTools", "Bash(mam event:*)")
    assert claude.report_options(_board(tmp_path)).args == ("--allowedTools", "Bash(mam event:*)", "Bash(mam board:*)")
    assert grok.report_options(ctx(tmp_path)).args == ("--allow", "Bash(mam event:*)")
    assert grok.report_options(_board(tmp_path)).args == (
        "--allow",
        "Bash(mam event:*)",
        "--allow",
        "Bash(mam board:*)",
    )
    rule = get_adapter("opencode").session_options(_board(tmp_path)).env["OPENCODE_CONFIG_CONTENT"]
    assert json.loads(rule)["permission"]["bash"] == {"*": "allow", "mam event *": "allow", "mam board *": "allow"}
    assert (
        "mam board *"
        not in json.loads(get_adapter("opencode").session_options(ctx(tmp_path)).env["OPENCODE_CONFIG_CONTENT"])[
            "permission"
        ]["bash"]
    )
    get_adapter("gemini").report_options(_board(tmp_path))
    policy = (tmp_path / "state" / "gemini-policy.toml").read_text()
    assert policy.count("[[rule]]") == 2 and 'commandPrefix = "mam board"' in policy
    get_adapter("gemini").report_options(ctx(tmp_path))
    policy = (tmp_path / "state" / "gemini-policy.toml").read_text()
    assert policy.count("[[rule]]") == 1 and "mam board" not in policy
    # --board gives nothing beyond report's rule where there is no rule (ask) or no limit (full).
    assert claude.session_options(_board(tmp_path, "ask")).args == claude.session_options(ctx(tmp_path, "ask")).args
    assert claude.session_options(_board(tmp_path, "full")).args == claude.session_options(ctx(tmp_path, "full")).args


def claude_session_settings(tmp_path: Path, user: object | None, permissions: str = "report", **env: str) -> object:
    """The per-session `--settings` file mam writes for claude, given the user's own settings.json."""
    if user is not None:
        folder = Path(env["CLAUDE_CONFIG_DIR"]) if "CLAUDE_CONFIG_DIR" in env else tmp_path / "h" / ".claude"
        folder.mkdir(parents=True, exist_ok=True)
        (folder / "settings.json").write_text(json.dumps(user) if not isinstance(user, str) else user)
    args = get_adapter("claude").hook_options(ctx(tmp_path, permissions, **env)).args
    assert args[0] == "--settings"
    return json.loads(Path(args[1]).read_text())


@pytest.mark.parametrize("mode", ["default", "acceptEdits", "plan"])
@pytest.mark.parametrize("permissions", ["ask", "report", "full"])
def test_claude_repeats_the_users_default_mode_so_it_is_not_asked_to_switch(
    tmp_path: Path, mode: str, permissions: str
) -> None:
    """2.1.332 nudges "Make auto mode your default permission mode?" at launch when only the user's
    settings choose a mode: the same mode in the session's --settings file keeps it and avoids that."""
    user = {"permissions": {"defaultMode": mode, "allow": ["Read"]}, "theme": "dark"}
    settings = claude_session_settings(tmp_path, user, permissions)
    assert isinstance(settings, dict)
    assert settings["permissions"] == {"defaultMode": mode}  # the mode only: nothing else is copied or widened
    assert json.loads((tmp_path / "h" / ".claude" / "settings.json").read_text()) == user  # the user's file untouched


def test_claude_reads_the_users_mode_under_claude_config_dir(tmp_path: Path) -> None:
    user = {"permissions": {"defaultMode": "plan"}}
    settings = claude_session_settings(tmp_path, user, CLAUDE_CONFIG_DIR=str(tmp_path / "cfg"))
    assert isinstance(settings, dict) and settings["permissions"] == {"defaultMode": "plan"}


@pytest.mark.parametrize("user", [None, {}, {"permissions": {"allow": ["Read"]}}, "{not json", ["a"]])
def test_claude_sets_no_mode_when_the_user_chose_none(tmp_path: Path, user: object) -> None:
    settings = claude_session_settings(tmp_path, user)
    assert isinstance(settings, dict) and "permissions" not in settings


@pytest.mark.parametrize("name", ["settings.json", "settings.local.json"])
def test_claude_leaves_a_projects_own_mode_to_win(tmp_path: Path, name: str) -> None:
    """A folder whose .claude/ settings choose a mode is not nudged, and a copy in --settings (which ranks
    above the project's files) would override the project's choice with the user's: nothing is copied."""
    project = tmp_path / "project" / ".claude"
    project.mkdir(parents=True)
    (project / name).write_text(json.dumps({"permissions": {"defaultMode": "plan"}}))
    settings = claude_session_settings(tmp_path, {"permissions": {"defaultMode": "acceptEdits"}})
    assert isinstance(settings, dict) and "permissions" not in settings


@pytest.mark.parametrize("mode", ["acceptEdit", "", 3, ["plan"], {"x": 1}])
def test_claude_copies_no_mode_it_does_not_know(tmp_path: Path, mode: object) -> None:
    settings = claude_session_settings(tmp_path, {"permissions": {"defaultMode": mode}})
    assert isinstance(settings, dict) and "permissions" not in settings


def test_claude_full_keeps_its_own_flag_and_the_users_mode_too(tmp_path: Path) -> None:
    """2.1.332 nudges under --dangerously-skip-permissions too; the flag's bypass mode wins over the copy."""
    settings = claude_session_settings(tmp_path, {"permissions": {"defaultMode": "default"}}, "full")
    assert isinstance(settings, dict) and settings["permissions"] == {"defaultMode": "default"}
    assert settings["skipDangerousModePermissionPrompt"] is True
    assert get_adapter("claude").session_options(ctx(tmp_path, "full")).args[0] == "--dangerously-skip-permissions"
