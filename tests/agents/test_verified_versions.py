"""A pinned real CLI (tests/real/clis.py, what tests/real/install_clis.py installs) moves only with its
screens: each pinned version has its captures in tests/agents/screens/<name>-<version>/ (what the
adapter's screen reading is checked against) and is the adapter's `verified_version` (what
`mam doctor` compares an installed CLI with). A pin changed alone fails with one line saying what to do."""

from __future__ import annotations

from pathlib import Path

import pytest

from mam.agents import get_adapter
from tests.real.clis import BY_NAME

SCREENS = Path(__file__).parent / "screens"


def drift(name: str, pinned: str) -> str:
    """What is missing for the pinned version of CLI `name` ("" when nothing is)."""
    folder = SCREENS / f"{name}-{pinned}"
    if not folder.is_dir() or not any(folder.glob("*.txt")):
        return (
            f"{name} is pinned at {pinned} but tests/agents/screens/{folder.name}/ holds no captured screens: "
            "capture them with the new version (see that folder's README.md of the last version) before moving the pin"
        )
    verified = get_adapter(name).verified_version
    if verified != pinned:
        return (
            f"{name} is pinned at {pinned} but its adapter says verified_version = {verified!r}: set it to {pinned!r}"
        )
    return ""


@pytest.mark.parametrize("name", sorted(BY_NAME))
def test_each_pinned_cli_has_its_screens_and_is_the_verified_version(name: str) -> None:
    problem = drift(name, BY_NAME[name].version)
    if problem:
        pytest.fail(problem, pytrace=False)


def test_a_pin_moved_without_screens_fails_in_one_line() -> None:
    problem = drift("gemini", "0.99.0")
    assert problem.startswith("gemini is pinned at 0.99.0 but tests/agents/screens/gemini-0.99.0/ holds no"), problem
    assert "\n" not in problem
