"""The package graph the code claims: mam.jobs never imports mam.remote (remote jobs are put together
from parts mam.remote supplies), and in jobs/, store/, monitor/ and remote/ a function-local import
is only for a module slow to import (found by reading the AST, so an import hidden in a function counts)."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

MAM = Path(__file__).resolve().parents[2] / "mam"
# Slow to import, so imported where used: `mam event` (once per agent event) and `mam --help` never pay
# for them. filelock (about 40 ms: it imports asyncio) and PyYAML (about 20 ms) guard and write the mirror.
SLOW = {"paho", "amqtt", "libtmux", "textual", "filelock", "yaml"}
# mam's own modules that are slow because of what they pull in, imported only once needed. Measured
# with `python -X importtime` (2 cores, warm bytecode): mam.jobs.attempt ~60-110 ms (mam.bus.mqtt and
# the broker endpoint, the reminders, usage readers) and mam.jobs.delivery ~50-90 ms (the pane
# backends, the agent adapters, session creation's readiness checks): `mam job delegate` registers
# its job first (mam.jobs.delegate) and imports them after.
SLOW_MAM = {"mam.jobs.attempt", "mam.jobs.delivery"}


def slow(name: str) -> bool:
    return name.split(".")[0] in SLOW or any(name == m or name.startswith(m + ".") for m in SLOW_MAM)


def imports(path: Path, package: str = "") -> list[tuple[str, bool]]:
    """(module, inside a function) for every import of a file, relative ones resolved."""
    tree = ast.parse(path.read_text(), str(path))
    package = package or ".".join(path.relative_to(MAM.parent).with_suffix("").parts[:-1])
    found: list[tuple[str, bool]] = []

    def visit(node: ast.AST, local: bool) -> None:
        for child in ast.iter_child_nodes(node):
            inner = local or isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef)
            if isinstance(child, ast.Import):
                found.extend((alias.name, inner) for alias in child.names)
            elif isinstance(child, ast.ImportFrom):
                base = child.module or ""
                if child.level:
                    parts = package.split(".")
                    base = ".".join(parts[: len(parts) - child.level + 1] + ([base] if base else []))
                found.extend((f"{base}.{alias.name}" if base else alias.name, inner) for alias in child.names)
                found.append((base, inner))
            visit(child, inner)

    visit(tree, False)
    return found


def files(package: str) -> list[Path]:
    return sorted((MAM / package).glob("*.py"))


@pytest.mark.parametrize("path", files("jobs"), ids=lambda p: p.name)
def test_jobs_never_imports_remote(path: Path) -> None:
    bad = [name for name, _local in imports(path) if name == "mam.remote" or name.startswith("mam.remote.")]
    assert bad == [], f"{path.name} imports {bad}"


@pytest.mark.parametrize(
    "path",
    [p for d in ("jobs", "store", "monitor", "remote") for p in files(d)],
    ids=lambda p: f"{p.parent.name}/{p.name}",
)
def test_function_local_imports_are_only_for_slow_modules(path: Path) -> None:
    local = {name for name, inside in imports(path) if inside and name}
    assert {name for name in local if not slow(name)} == set()


def test_the_scan_sees_an_import_hidden_in_a_function(tmp_path: Path) -> None:
    """The checks above can fail: the scan finds function-local and relative imports."""
    probe = tmp_path / "probe.py"
    probe.write_text("def f():\n    from mam.remote.dispatch import Dispatch\n    from ..remote import runner\n")
    found = imports(probe, package="mam.jobs")
    assert ("mam.remote.dispatch", True) in found and ("mam.remote.runner", True) in found
