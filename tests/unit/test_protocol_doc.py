"""docs/node-protocol.md documents every operation of the node protocol as mam/protocol.py declares it: one section
per operation, each with the table of its fields generated from the declaration (`table`), no more, no fewer."""

from __future__ import annotations

import re
from pathlib import Path

from mam.protocol import OPS, VERSION, Field

DOC = (Path(__file__).resolve().parents[2] / "docs" / "node-protocol.md").read_text(encoding="utf-8")
KIND = {str: "text", bool: "flag", int: "integer", float: "seconds", list: "list of text"}


def kind(f: Field) -> str:
    said = KIND[f.kind] + (f" ({f.id})" if f.id else "")
    if f.choices:
        said += ": " + ", ".join(f"`{c}`" for c in f.choices)
    if f.kind in (int, float) and f.least is not None:
        said += f", at least {f.least}"
    return said


def table(op: str) -> str:
    """The fields of `op` as the page shows them (regenerate the page's table from this when one changes)."""
    if not OPS[op]:
        return "No fields."
    rows = ["| field | type | CLI | required | what |", "| --- | --- | --- | --- | --- |"]
    for f in OPS[op]:
        flag = f"`{f.flag}`" if f.flag else "-"
        rows.append(f"| `{f.name}` | {kind(f)} | {flag} | {'yes' if f.required else 'no'} | {f.help_text} |")
    return "\n".join(rows)


def sections() -> dict[str, str]:
    parts = re.split(r"^### (\w+)\n", DOC.split("\n## Operations\n", 1)[1], flags=re.M)
    return dict(zip(parts[1::2], parts[2::2], strict=True))


def test_every_operation_has_its_section_and_no_other() -> None:
    assert list(sections()) == list(OPS)


def test_each_section_holds_its_fields_as_declared() -> None:
    for op, text in sections().items():
        assert table(op) in text, f"docs/node-protocol.md's table of {op} differs from mam/protocol.py"


def test_the_page_names_the_version_and_the_check_can_fail(monkeypatch) -> None:
    assert f'"v": {VERSION}' in DOC
    monkeypatch.setitem(OPS, "cancel", (*OPS["cancel"], Field("force", bool, "Cancel harder", flag="--force")))
    assert table("cancel") not in sections()["cancel"]  # a field added to the declaration fails the page
