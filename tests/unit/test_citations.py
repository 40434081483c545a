"""The repo cites only files it holds: no path out of the repo, no document it lacks.

Every file git tracks (code, tests, docs, skills, pyproject.toml, scripts) is read. A citation is a
path that leaves the repo (`../shared/...`, `/work/...`, `shared/design/...`), a `docs/NAME.md` path,
or an upper-case document name (`NAME.md`, as the field notes' file was). Each must name a file the repo
holds; a `docs/NAME.md#anchor` must name one of its headings. A few upper-case names are not the
repo's documents by design, each listed with its reason.
"""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest

from tests.unit.test_doc_links import anchors

ROOT = Path(__file__).resolve().parents[2]

# The design's notes and style guide, named in parts: a grep of the repo for either name finds no file at all.
NOTES, STYLE = "FIELD" + "_NOTES", "HOUSE" + "_STYLE"
OUTSIDE = re.compile(rf"(?:\.\./)+shared\b|/work/shared\b|\bshared/design\b|\b{NOTES}\b|\b{STYLE}\b")
DOCS_PATH = re.compile(r"(?<![\w/.-])docs/([\w.-]+\.md)(?:#([\w-]+))?")
UPPER_DOC = re.compile(r"(?<![\w/.-])([A-Z][A-Z0-9_]*\.md)\b")

# Upper-case names that are not citations of the repo's own documents.
NOT_OURS = {
    "AGENTS.md": "codex's and opencode's instruction file in a user's workspace",
    "CLAUDE.md": "Claude Code's instruction file in a user's workspace",
    "GEMINI.md": "gemini's instruction file, as its own screens show it",
    "CHANGELOG.md": "herdr's changelog, named as herdr's in docs/herdr.md",
    "CONFIGURATION.md": "a file of herdr's repository, named as such in docs/herdr.md",
    "SOCKET_API.md": "a file of herdr's repository, named as such in docs/herdr.md",
    "SKILL.md": "the file name of every skill (skills/*/SKILL.md), also in a user's .agents/skills/",
    "DEMO_FIXES.md": "a file the demo agent writes into a test's workspace",
    "NOTE.md": "a file a test's demo agent writes",
}
# docs/NAME.md paths that name a user's file in an example, not this repo's docs/.
EXAMPLES = {"guide.md"}


def tracked() -> list[Path]:
    out = subprocess.run(["git", "-C", str(ROOT), "ls-files", "-z"], capture_output=True, check=True).stdout
    files = [ROOT / name for name in out.decode().split("\0") if name]
    return [f for f in files if f.is_file() and f != Path(__file__).resolve()]


def problems(text: str, *, have: set[str]) -> list[str]:
    """What in `text` cites a file the repo lacks (`have`: the repo's paths, relative to its root)."""
    found = [f"a path out of the repo: {m.group(0)!r}" for m in OUTSIDE.finditer(text)]
    basenames = {Path(p).name for p in have}
    for m in DOCS_PATH.finditer(text):
        name, anchor = m.group(1), m.group(2)
        if name in EXAMPLES:
            continue
        if f"docs/{name}" not in have:
            found.append(f"docs/{name}, which the repo lacks")
        elif anchor and anchor not in anchors(ROOT / "docs" / name):
            found.append(f"docs/{name}#{anchor}: no such heading")
    for m in UPPER_DOC.finditer(text):
        name = m.group(1)
        if name not in basenames and name not in NOT_OURS:
            found.append(f"{name}, which the repo lacks")
    return found


def test_no_file_cites_a_file_the_repo_lacks() -> None:
    files = tracked()
    have = {str(f.relative_to(ROOT)) for f in files}
    found = []
    for f in files:
        try:
            text = f.read_text(encoding="utf-8")
        except UnicodeDecodeError:
            continue  # images and other binary files
        found += [f"{f.relative_to(ROOT)}: {p}" for p in problems(text, have=have)]
    assert not found, "\n".join(found)


@pytest.mark.parametrize(
    "planted",
    [
        f"see {NOTES}.md",
        f"({NOTES}, NATS)",
        f"as {STYLE} says",
        "../shared/design/ARCHITECTURE.md says so",
        "as /work/shared/design/notes.txt measured",
        "docs/nowhere.md",
        "docs/broker.md#no-such-heading",
        "MEASUREMENTS.md",
    ],
)
def test_a_planted_citation_of_a_missing_file_is_found(planted: str) -> None:
    have = {str(f.relative_to(ROOT)) for f in tracked()}
    assert problems(f"# a comment: {planted}\n", have=have)


def test_citations_of_the_repos_own_files_pass() -> None:
    have = {str(f.relative_to(ROOT)) for f in tracked()}
    text = "docs/broker.md#what-mams-code-relies-on-as-measured, MESSAGING.md, README.md, skills/x/SKILL.md"
    assert problems(text, have=have) == []
