"""mam.util.lean_json gives what the json package gives (the lean `mam event` path relies on it)."""

from __future__ import annotations

import json
import math
import subprocess
import sys
from pathlib import Path

import pytest

from mam.util import lean_json

REPO = Path(__file__).resolve().parents[2]

DOCS = [
    '{"a": 1, "b": [1, 2.5, -3e-7, true, false, null], "c": {"d": "naïve ✓ \\u00e9 \\ud83d\\ude00"}}',
    "  [1, 2]\n",
    '"just a string"',
    "12345678901234567890123",
    '{"nested": {"deep": [[[{}]]]}, "empty": "", "esc": "\\n\\t\\"\\\\/"}',
    '{"dup": 1, "dup": 2}',
]
BAD = ["", "   ", "[1, 2", '{"a": 1} x', "{'a': 1}", "[1,]", "nul"]
OBJS = [
    {"b": 1, "a": [1, 2.5, None, True, False], "c": {"z": "naïve ✓ 😀", "y": -0.0}},
    {"id": "job-1", "seq": 3, "ts_ms": 1733000000000, "body": {"message": "x" * 500}},
    [1, "two", {"3": 4}],
    {"s": "\u2028\u2029\x00\x1f", "t": 2},
    "plain",
    1e300,
]


@pytest.mark.parametrize("doc", DOCS)
def test_loads_matches_json(doc: str) -> None:
    assert lean_json.loads(doc) == json.loads(doc)


@pytest.mark.parametrize("doc", BAD)
def test_loads_refuses_what_json_refuses(doc: str) -> None:
    with pytest.raises(ValueError):
        json.loads(doc)
    with pytest.raises(ValueError):
        lean_json.loads(doc)


def test_constants_as_json_reads_them() -> None:
    got = lean_json.loads("[NaN, Infinity, -Infinity]")
    assert math.isnan(got[0]) and got[1:] == [math.inf, -math.inf]


@pytest.mark.parametrize("obj", OBJS)
def test_canonical_matches_json(obj: object) -> None:
    want = json.dumps(obj, sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False)
    assert lean_json.canonical(obj) == want


def test_canonical_refuses_what_json_refuses() -> None:
    for bad in (float("nan"), {"a": float("inf")}, {"a": object()}):
        with pytest.raises((ValueError, TypeError)):
            json.dumps(bad, allow_nan=False)
        with pytest.raises((ValueError, TypeError)):
            lean_json.canonical(bad)


def test_lean_modules_import_neither_json_nor_re() -> None:
    # -S: without site, which in an editable install imports setuptools' finder (and `re` with it).
    code = (
        f"import sys; sys.path.insert(0, {str(REPO)!r}); import mam.fast_event, mam.forkserver.client; "
        "print(' '.join(m for m in ('json', 're', 'click', 'paho') if m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-S", "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.split() == []
