"""The node's CodeWatch (mam.node.server): a mam module changed on disk after the node loaded it is seen within
SLICES looks, whichever slice its file falls in; a removed one at once in its slice; nothing changed, nothing seen."""

from __future__ import annotations

import os
import sys
import types
from collections.abc import Iterator
from pathlib import Path

import pytest

from mam.node.server import CodeWatch


@pytest.fixture
def probes(tmp_path: Path) -> Iterator[list[Path]]:
    """Twelve mam-named modules backed by files of this test (more than SLICES, so they fall in every slice)."""
    files = []
    for i in range(12):
        path = tmp_path / f"probe{i}.py"
        path.write_text(f"X = {i}\n")
        module = types.ModuleType(f"mam._codewatch_probe{i}")
        module.__file__ = str(path)
        sys.modules[module.__name__] = module
        files.append(path)
    yield files
    for i in range(12):
        sys.modules.pop(f"mam._codewatch_probe{i}", None)


def _looks_until_seen(watch: CodeWatch) -> int | None:
    for look in range(1, 3 * CodeWatch.SLICES):
        if watch.changed():
            return look
    return None


def test_nothing_changed_is_never_seen(probes: list[Path]) -> None:
    watch = CodeWatch()
    assert not any(watch.changed() for _ in range(3 * CodeWatch.SLICES))


@pytest.mark.parametrize("which", range(12))
def test_a_changed_file_is_seen_within_slices_looks(probes: list[Path], which: int) -> None:
    watch = CodeWatch()
    path = probes[which]
    path.write_text("X = 'changed, and longer'\n")
    st = path.stat()
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns + 1_000_000_000))
    look = _looks_until_seen(watch)
    assert look is not None and look <= CodeWatch.SLICES, look


def test_a_removed_file_is_seen_and_a_module_loaded_later_is_watched_too(probes: list[Path], tmp_path: Path) -> None:
    watch = CodeWatch()
    probes[3].unlink()
    assert _looks_until_seen(watch) is not None
    probes[3].write_text("X = 3\n")
    watch = CodeWatch()
    late = tmp_path / "late.py"
    late.write_text("Y = 1\n")
    module = types.ModuleType("mam._codewatch_late")
    module.__file__ = str(late)
    sys.modules[module.__name__] = module
    try:
        assert not any(watch.changed() for _ in range(CodeWatch.SLICES))  # its first stamp is recorded
        late.write_text("Y = 'changed, and longer'\n")
        assert _looks_until_seen(watch) is not None
    finally:
        sys.modules.pop(module.__name__, None)
