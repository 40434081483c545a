"""Claude 2.1.332's permission prompt as `mam web` reads it before answering: the tool call it asks
about, its options and the selected one, from the captured screens; anything laid out otherwise
(another version's banner, no footer, another tool's dialog, the auto-mode question) is not read."""

from __future__ import annotations

from pathlib import Path

from mam.agents import get_adapter
from mam.agents.base import PermissionPrompt

SCREENS = Path(__file__).parent / "screens" / "claude-2.1.332"
CLAUDE = get_adapter("claude")


def screen(name: str) -> str:
    return (SCREENS / f"{name}.txt").read_text(encoding="utf-8")


def test_the_captured_prompt_names_its_command_and_options() -> None:
    assert CLAUDE.permission_prompt(screen("permission-prompt")) == PermissionPrompt(
        "Bash(touch /tmp/rc/claude-touched3)", ("No", "Yes"), selected=0, allow=1, deny=0
    )


def test_a_command_after_a_gutter_is_read_without_it() -> None:
    prompt = CLAUDE.permission_prompt(screen("permission-prompt-gutter"))
    assert prompt is not None
    assert prompt.tool == "Bash(python3 -c 'open('/tmp/rc/proj-claude/asked-allow.txt', \"w\")')"
    assert (prompt.options, prompt.selected) == (("No", "Yes"), 0)


def test_the_selection_moved_is_read() -> None:
    moved = screen("permission-prompt").replace(" ❯ No\n   Yes", "   No\n ❯ Yes")
    prompt = CLAUDE.permission_prompt(moved)
    assert prompt is not None and prompt.selected == 1


def test_what_is_not_the_captured_prompt_is_not_read() -> None:
    original = screen("permission-prompt")
    for name in ("auto-mode-check-dialog", "trust-dialog", "bypass-permissions-dialog", "ready", "brief-submitted"):
        assert CLAUDE.permission_prompt(screen(name)) is None, name
    variants = {
        "another version": original.replace("Claude Code v2.1.332", "Claude Code v2.2.0"),
        "no footer": original.replace(" Esc to cancel · Tab to amend", ""),
        "another tool": original.replace(" Bash command", " Edit file"),
        "no selection": original.replace(" ❯ No", "   No"),
        "no Yes": original.replace("   Yes", "   Yes, and don't ask again"),
    }
    for why, text in variants.items():
        assert text != original, why
        assert CLAUDE.permission_prompt(text) is None, why


def test_other_clis_answer_no_prompt_from_mam() -> None:
    for name in ("codex", "opencode", "gemini", "grok", "hermes", "demo"):
        adapter = get_adapter(name)
        assert adapter.prompt_version == "" and adapter.permission_prompt(screen("permission-prompt")) is None
