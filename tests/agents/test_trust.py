"""Folder trust records: one entry for the session's cwd, everything else in the CLI's file kept."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import pytest

if sys.version_info >= (3, 11):
    import tomllib
else:
    import tomli as tomllib

from mam.agents import get_adapter
from mam.errors import AgentError


def test_claude_trust_keeps_every_other_key_and_the_file_mode(tmp_path: Path) -> None:
    tmp_path = tmp_path / "agent-home"
    tmp_path.mkdir()
    state = tmp_path / ".claude.json"
    before = {
        "hasCompletedOnboarding": True,
        "customApiKeyResponses": {"approved": ["abc"]},
        "projects": {"/other": {"hasTrustDialogAccepted": False, "allowedTools": ["x"]}, "/p": {"history": [1, 2]}},
    }
    state.write_text(json.dumps(before))
    state.chmod(0o600)
    written = get_adapter("claude").trust_folder("/p", {"HOME": str(tmp_path)})
    after = json.loads(state.read_text())
    assert written == state and (state.stat().st_mode & 0o777) == 0o600
    assert after["projects"]["/p"] == {"history": [1, 2], "hasTrustDialogAccepted": True}
    assert {k: v for k, v in after.items() if k != "projects"} == {k: v for k, v in before.items() if k != "projects"}
    assert after["projects"]["/other"] == before["projects"]["/other"]
    assert get_adapter("claude").trust_folder("/p", {"HOME": str(tmp_path)}) is None  # already trusted: not rewritten
    assert [p.name for p in tmp_path.iterdir()] == [".claude.json"]  # no temp file left


def test_claude_trust_follows_claude_config_dir(tmp_path: Path) -> None:
    config = tmp_path / "cfg"
    get_adapter("claude").trust_folder("/p", {"HOME": str(tmp_path / "elsewhere"), "CLAUDE_CONFIG_DIR": str(config)})
    assert json.loads((config / ".claude.json").read_text())["projects"]["/p"]["hasTrustDialogAccepted"] is True
    assert not (tmp_path / "elsewhere").exists()


def test_claude_trust_refuses_a_file_it_cannot_read(tmp_path: Path) -> None:
    (tmp_path / ".claude.json").write_text("{not json")
    with pytest.raises(AgentError, match="--no-trust"):
        get_adapter("claude").trust_folder("/p", {"HOME": str(tmp_path)})
    assert (tmp_path / ".claude.json").read_text() == "{not json"


CODEX_CONFIG = """# my settings
model = "o3"
model_provider = "mock"

[model_providers.mock]
base_url = "http://127.0.0.1:1/v1"

[projects."/already"]
trust_level = "trusted"

[projects."/p"]
note = "kept"

[tui]
theme = "dark"
"""


def test_codex_trust_edits_one_table_and_keeps_the_rest(tmp_path: Path) -> None:
    config = tmp_path / ".codex" / "config.toml"
    config.parent.mkdir()
    config.write_text(CODEX_CONFIG)
    codex = get_adapter("codex")
    assert codex.trust_folder("/p", {"HOME": str(tmp_path)}) == config
    text = config.read_text()
    parsed = tomllib.loads(text)
    assert parsed["projects"]["/p"] == {"trust_level": "trusted", "note": "kept"}
    assert parsed["projects"]["/already"] == {"trust_level": "trusted"}
    assert parsed["tui"] == {"theme": "dark"} and parsed["model"] == "o3" and text.startswith("# my settings\n")
    assert codex.trust_folder("/already", {"HOME": str(tmp_path)}) is None


def test_codex_trust_adds_a_table_for_a_new_folder_with_a_quoted_path(tmp_path: Path) -> None:
    config = tmp_path / "ch" / "config.toml"
    config.parent.mkdir()
    config.write_text(CODEX_CONFIG)
    odd = '/tmp/a "quoted" \\ folder'
    get_adapter("codex").trust_folder(odd, {"HOME": str(tmp_path), "CODEX_HOME": str(config.parent)})
    parsed = tomllib.loads(config.read_text())
    assert parsed["projects"][odd] == {"trust_level": "trusted"}
    assert parsed["projects"]["/p"] == {"note": "kept"}  # only the session's own folder changes


def test_codex_trust_creates_the_file_when_there_is_none(tmp_path: Path) -> None:
    get_adapter("codex").trust_folder("/p", {"HOME": str(tmp_path)})
    assert tomllib.loads((tmp_path / ".codex" / "config.toml").read_text()) == {
        "projects": {"/p": {"trust_level": "trusted"}}
    }


def test_codex_trust_leaves_an_inline_projects_table_alone(tmp_path: Path) -> None:
    config = tmp_path / ".codex" / "config.toml"
    config.parent.mkdir()
    config.write_text('projects = { "/x" = { trust_level = "trusted" } }\n')
    with pytest.raises(AgentError, match="--no-trust"):
        get_adapter("codex").trust_folder("/p", {"HOME": str(tmp_path)})
    assert config.read_text() == 'projects = { "/x" = { trust_level = "trusted" } }\n'


@pytest.mark.parametrize("agent", ["opencode", "grok", "hermes", "agy", "demo"])
def test_clis_without_per_folder_trust_write_nothing(agent: str, tmp_path: Path) -> None:
    tmp_path = tmp_path / "agent-home"
    tmp_path.mkdir()
    assert get_adapter(agent).trust_folder("/p", {"HOME": str(tmp_path)}) is None
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("agent", ["claude", "codex"])
def test_concurrent_trusts_lose_no_folder(agent: str, tmp_path: Path) -> None:
    """Sessions created at once in one HOME each record their folder; none overwrites another's."""
    import multiprocessing

    home = tmp_path / "agent-home"
    home.mkdir()
    folders = [f"/projects/p{i}" for i in range(12)]
    ctx = multiprocessing.get_context("spawn")
    with ctx.Pool(6) as pool:
        pool.starmap(_trust, [(agent, folder, str(home)) for folder in folders])
    if agent == "claude":
        projects = json.loads((home / ".claude.json").read_text())["projects"]
        assert all(projects[f]["hasTrustDialogAccepted"] is True for f in folders)
    else:
        projects = tomllib.loads((home / ".codex" / "config.toml").read_text())["projects"]
        assert all(projects[f]["trust_level"] == "trusted" for f in folders)


def _trust(agent: str, folder: str, home: str) -> None:
    get_adapter(agent).trust_folder(folder, {"HOME": home})


def test_gemini_trust_adds_one_folder_and_keeps_the_others(tmp_path: Path) -> None:
    """What gemini 0.61.0's own "Trust folder" answer writes: {"<folder>": "TRUST_FOLDER"}, 0600."""
    gemini = get_adapter("gemini")
    path = tmp_path / ".gemini" / "trustedFolders.json"
    path.parent.mkdir()
    path.write_text(json.dumps({"/other": "DO_NOT_TRUST"}))
    assert gemini.trust_folder("/p", {"HOME": str(tmp_path)}) == path
    assert json.loads(path.read_text()) == {"/other": "DO_NOT_TRUST", "/p": "TRUST_FOLDER"}
    assert path.stat().st_mode & 0o777 == 0o600
    assert gemini.trust_folder("/p", {"HOME": str(tmp_path)}) is None  # already trusted: not rewritten
    path.write_text("[1, 2]")
    with pytest.raises(AgentError, match="not a JSON object"):
        gemini.trust_folder("/q", {"HOME": str(tmp_path)})


TRUST_FILES = {  # agent -> (its file under HOME, its content with /other recorded)
    "claude": (".claude.json", json.dumps({"projects": {"/other": {"hasTrustDialogAccepted": True}}})),
    "codex": (".codex/config.toml", '[projects."/other"]\ntrust_level = "trusted"\n'),
    "gemini": (".gemini/trustedFolders.json", json.dumps({"/other": "TRUST_FOLDER"})),
}


@pytest.mark.parametrize("agent", sorted(TRUST_FILES))
def test_a_symlinked_config_file_stays_a_link_and_its_target_gets_the_record(agent: str, tmp_path: Path) -> None:
    """Issue 25, item 11: recording trust replaced a symlinked ~/.claude.json (a dotfiles repo) with a plain file."""
    home, dotfiles = tmp_path / "agent-home", tmp_path / "dotfiles"
    name, text = TRUST_FILES[agent]
    link = home / name
    link.parent.mkdir(parents=True)
    dotfiles.mkdir()
    target = dotfiles / Path(name).name
    target.write_text(text)
    target.chmod(0o600)
    link.symlink_to(target)
    get_adapter(agent).trust_folder("/p", {"HOME": str(home)})
    assert link.is_symlink() and link.resolve() == target
    written = target.read_text()
    assert "/other" in written and "/p" in written, written
    assert sorted(p.name for p in dotfiles.iterdir()) == [target.name]  # no temporary file left
    assert sorted(p.name for p in link.parent.iterdir()) == [link.name]


@pytest.mark.parametrize(
    ("agent", "text"),
    [
        ("codex", '[projects."/p"]\ntrust_level = "untrusted"\n'),
        ("gemini", json.dumps({"/p": "DO_NOT_TRUST"})),
    ],
)
def test_a_folder_the_user_marked_untrusted_is_left_so_and_the_trust_fails_saying_why(
    agent: str, text: str, tmp_path: Path
) -> None:
    """Issue 25, item 11: recording trust overrode a folder the user had explicitly marked untrusted."""
    path = tmp_path / TRUST_FILES[agent][0]
    path.parent.mkdir(parents=True)
    path.write_text(text)
    with pytest.raises(AgentError, match="marks /p as untrusted") as e:
        get_adapter(agent).trust_folder("/p", {"HOME": str(tmp_path)})
    assert "\n" not in str(e.value) and "--no-trust" in str(e.value)
    assert path.read_text() == text


def test_session_create_in_a_folder_codex_distrusts_fails_with_one_line(
    workspace, fake_agents_on_path, tmp_path: Path
) -> None:
    from tests.helpers.mamcli import mam

    config = Path(os.environ["HOME"]) / ".codex" / "config.toml"
    config.parent.mkdir(parents=True)
    text = f'[projects."{workspace.root}"]\ntrust_level = "untrusted"\n'
    config.write_text(text)
    proc = mam("session", "create", "--agent", "codex", "--role", "dev", "--session", "c", "--cwd", str(workspace.root))
    assert proc.returncode != 0 and proc.stdout == "", proc.stdout
    assert len(proc.stderr.strip().splitlines()) == 1 and "untrusted" in proc.stderr, proc.stderr
    assert config.read_text() == text
    assert "c" not in mam("session", "status").stdout.split()
