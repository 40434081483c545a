"""docs/architecture.md cannot drift from the repo. "The path of one job" is a walk of at most 20 files, one
step per file, each of them in the repo, and every file or folder that section names exists. Every test the page
cites exists: `tests/...py::name`, a `::name` that continues the file named before it, and a bare `test_name`
after its file are each a function of that file (read with `ast`: no test module is imported)."""

from __future__ import annotations

import ast
import re
from functools import cache
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
DOC = (ROOT / "docs" / "architecture.md").read_text(encoding="utf-8")
MAX_WALK = 20  # issue 23: a walk of one delegation from the skill script to its exit opens at most 20 files
ITEM = re.compile(r"^(\d+)\. ")
# A test file named anywhere (in a code span or a link), with its test; a `::name` or a bare `test_name` in a code span.
CITED = re.compile(r"(tests/[\w/]+\.py)(?:::(\w+))?|`::(\w+)`|`(test_\w+)`")


def section(title: str) -> str:
    start = DOC.index(f"\n## {title}\n")
    end = DOC.find("\n## ", start + 1)
    return DOC[start : end if end >= 0 else len(DOC)]


def walk() -> list[tuple[int, str]]:
    """The section's first numbered list: (number, text) of each step, its continuation lines included."""
    items: list[tuple[int, str]] = []
    for line in section("The path of one job").splitlines():
        m = ITEM.match(line)
        if m:
            items.append((int(m.group(1)), line[m.end() :]))
        elif items and line.startswith(" ") and line.strip():
            number, text = items[-1]
            items[-1] = (number, f"{text} {line.strip()}")
        elif items:
            break  # the list ended
    return items


def code_spans(text: str) -> list[str]:
    return [span.strip() for span in text.split("`")[1::2]]


def repo_path(span: str) -> str | None:
    """The repo path a code span names (`mam/jobs/ledger.py`, `mam/monitor/`, `mam.jobs.ledger`), else None: a
    workspace path (`.mam/...`), a target (`remote:RUNNER/SESSION`) or a command is not one."""
    if re.fullmatch(r"mam(\.\w+)+", span):
        parts = span.split(".")
        for n in range(len(parts), 1, -1):  # the module a dotted name starts with (it may go on with an attribute)
            for candidate in ("/".join(parts[:n]) + ".py", "/".join(parts[:n]) + "/__init__.py"):
                if (ROOT / candidate).is_file():
                    return candidate
        return "/".join(parts) + ".py"  # no such module: reported as missing
    first = span.split("/")[0]
    if "/" not in span or " " in span or first.startswith(".") or not (ROOT / first).is_dir():
        return None
    return span


def exists(path: str) -> bool:
    if "<" in path:  # a placeholder (`mam/agents/<cli>.py`): some file fits it
        return any(ROOT.glob(re.sub(r"<[^>]*>", "*", path)))
    return (ROOT / path).exists()


@cache
def functions(path: str) -> frozenset[str]:
    tree = ast.parse((ROOT / path).read_text(encoding="utf-8"), path)
    return frozenset(n.name for n in ast.walk(tree) if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef))


def test_the_walk_opens_at_most_20_files_each_of_them_in_the_repo() -> None:
    steps = walk()
    assert [number for number, _ in steps] == list(range(1, len(steps) + 1)), "the walk's steps are not numbered 1..n"
    opened: list[str] = []
    for number, text in steps:
        named = [p for p in (repo_path(span) for span in code_spans(text)) if p is not None]
        assert named and text.startswith(f"`{named[0]}`"), f"step {number} does not begin with the file it opens"
        opened += [p for p in named if p not in opened]
    missing = [p for p in opened if not (ROOT / p).is_file()]
    assert not missing, f"the walk names files that are not in the repo: {missing}"
    assert 0 < len(opened) <= MAX_WALK, (
        f"the walk names {len(opened)} files (at most {MAX_WALK}): {opened}; move the ones a reader need not open "
        "to the list after it"
    )


def test_every_file_the_path_of_one_job_names_exists_and_counts() -> None:
    """Every repo file the section names is one a reader opens: all of them count, no list of files "called without
    opening" beside the walk."""
    text = section("The path of one job")
    named = {p for p in (repo_path(span) for span in code_spans(text)) if p is not None}
    assert named
    missing = sorted(p for p in named if not exists(p))
    assert not missing, f"docs/architecture.md, 'The path of one job', names what is not in the repo: {missing}"
    files = {p for p in named if ((ROOT / p).is_file() or "<" in p) and not p.startswith("tests/")}
    assert len(files) <= MAX_WALK, f"the section names {len(files)} files (at most {MAX_WALK}): {sorted(files)}"
    assert "without opening" not in text


def test_every_test_the_page_cites_exists() -> None:
    problems, cited, last = [], 0, ""
    for m in CITED.finditer(DOC):
        path, name, continued, bare = m.groups()
        line = DOC.count("\n", 0, m.start()) + 1
        if path:
            last = path
            if not (ROOT / path).is_file():
                problems.append(f"line {line}: no file {path}")
                continue
        else:
            name = continued or bare
            if not last:
                problems.append(f"line {line}: {name} follows no test file")
                continue
            if not (ROOT / last).is_file():
                continue  # reported where it was named
        cited += 1
        if name and name not in functions(last):
            problems.append(f"line {line}: {last} has no {name}")
    assert cited > 50, "the page's test citations were not found: has their format changed?"
    assert not problems, "docs/architecture.md cites tests that do not exist:\n" + "\n".join(problems)
