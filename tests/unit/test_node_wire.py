"""The node's frames (mam/node/wire.py) write and read JSON with `_json`'s C functions, not the `json`
package (its import cost every `mam event` client about 8 ms): they must agree with `json.dumps` and
`json.loads` on everything the node and its clients send, and refuse what is not a JSON object."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from mam.node.wire import HEADER, Frames, dumps, frame, loads

REPO = Path(__file__).resolve().parents[2]
SAMPLES: list[Any] = [
    {},
    [],
    {"argv": ["job", "delegate", "--brief", 'a "quoted"\nline\twith tabs'], "pid": 12, "ppid": 1},
    {"env": {"LANG": "C.UTF-8", "PS1": "\x1b[1m$ \x1b[0m", "X": "é漢字🙂", "BAD": "raw \udcff byte"}},
    {"exit": 0, "job": "job-0123456789abcdef", "accepted": True, "refused": None, "flag": False},
    {"started": 1796210790.4429, "neg": -0.0, "big": 1e300, "small": 5e-324, "int": -(2**70)},
    {"nested": [[[{"a": [1, 2, {"b": []}]}]]]},
]


@pytest.mark.parametrize("obj", SAMPLES)
def test_it_writes_what_json_writes_and_reads_it_back(obj: Any) -> None:
    text = dumps(obj)
    assert text == json.dumps(obj, separators=(",", ":"))
    assert loads(text.encode()) == json.loads(text) == obj
    if isinstance(obj, dict):
        assert Frames().feed(frame(obj) + frame({"next": 1})) == [obj, {"next": 1}]


@pytest.mark.parametrize(
    "data",
    [b"", b"   ", b"[1", b'{"a":1}x', b"NaN", b'{"a":-Infinity}', b"\xff\xfe", b'{"a":"\x01"}', b"[" * 100_000],
)
def test_what_is_not_json_is_a_value_error(data: bytes) -> None:
    with pytest.raises(ValueError):
        loads(data)


@pytest.mark.parametrize("obj", [{"x": float("nan")}, {1: "int key"}, {"s": {1, 2}}, {"b": b"bytes"}])
def test_what_json_cannot_carry_is_refused(obj: Any) -> None:
    with pytest.raises((TypeError, ValueError)):
        dumps(obj)


def test_a_frame_that_is_not_an_object_or_too_big_is_refused() -> None:
    with pytest.raises(ValueError):
        Frames().feed(len(b"[]").to_bytes(HEADER, "big") + b"[]")
    with pytest.raises(ValueError):
        Frames().feed((1 << 30).to_bytes(HEADER, "big"))
    frames = Frames()
    whole = frame({"a": "split"})
    assert frames.feed(whole[:3]) == [] and frames.feed(whole[3:]) == [{"a": "split"}]


def test_the_wire_imports_no_json_package() -> None:
    probe = (
        f"import sys; sys.path.insert(0, {str(REPO)!r}); import mam.node.wire; "
        "print(' '.join(m for m in ('json', 're', 'typing') if m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-S", "-c", probe], capture_output=True, text=True, check=True)
    assert out.stdout.split() == []


PRETTY: list[Any] = [
    *SAMPLES,
    {"result": "done\x1b]52;c;aGk=\x07 \x9b31m end", "report": "é漢字🙂\u2028", "z": None, "a": [1.5, True, {}]},
    {"id": "job-1", "state": "completed", "usage": {"input_tokens": 3}, "children": [], "paused": None},
]


@pytest.mark.parametrize("obj", PRETTY)
def test_pretty_writes_what_json_text_writes(obj: Any) -> None:
    """`mam job delegate --json` prints with the lean writer what mam.util.text.json_text prints."""
    from mam.node.wire import pretty
    from mam.util.text import json_text

    assert pretty(obj) == json_text(obj, indent=2)


@pytest.mark.parametrize(
    "text", ["plain text\nwith\ttabs", "é漢字🙂", "a\x1b[31mred\x1b[0m", "bell\x07", "c1 \x9b2J", ""]
)
def test_the_front_ends_cleaning_is_for_terminals(text: str) -> None:
    from mam.node.front import _clean
    from mam.util.text import for_terminal

    assert _clean(text) == for_terminal(text)


def test_a_60_mib_frame_read_in_many_pieces_costs_work_linear_in_its_size() -> None:
    """Issue 39, item 11: one 60 MiB frame cost the node 9 CPU-seconds (the buffer was copied whole at every
    piece: quadratic). Measured without a clock, as the bytes allocated while feeding it in 64 KiB pieces
    (tracemalloc's peak within each feed, summed): about 5 times the frame now; some 68 times at 8 MiB
    before, growing with the size."""
    import tracemalloc

    data = frame({"brief": "x" * (60 << 20)})
    piece = 64 << 10
    frames, got, moved = Frames(), [], 0
    tracemalloc.start()
    try:
        for at in range(0, len(data), piece):
            tracemalloc.reset_peak()
            before = tracemalloc.get_traced_memory()[0]
            got += frames.feed(data[at : at + piece])
            moved += tracemalloc.get_traced_memory()[1] - before
    finally:
        tracemalloc.stop()
    assert len(got) == 1 and len(got[0]["brief"]) == 60 << 20
    assert moved < 16 * len(data), f"{moved / len(data):.0f} times the frame's bytes were allocated to read it"
