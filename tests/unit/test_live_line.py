"""The live status line stays short of the terminal's last columns, so the `^C` a terminal echoes on Ctrl-C
stays on the line and is cleared with it (seen in the README walk: the live line and a stray `^` were left
above `job ... is still running`)."""

from __future__ import annotations

import io
import time

from mam.node.live import CLEAR, LiveLine


class Terminal(io.StringIO):
    columns = 60


def test_the_line_leaves_room_for_the_ctrl_c_echo(monkeypatch):
    out = Terminal()
    line = LiveLine(out=out, interval=60)
    monkeypatch.setattr(line, "_columns", lambda: out.columns)
    now = int(time.time() * 1000)
    job = {
        "id": "job-0123456789abcdef",
        "state": "running",
        "started_ms": now,
        "delivered_ms": now,
        "created_ms": now,
        "last_event_ms": now,
        "heartbeat_ms": 30000,
        "heartbeat_k": 4,
        "budget_ms": 3600000,
    }
    line.update({"job": job, "type": "progress", "message": "working " * 20})
    line.stop()
    drawn = [part for part in out.getvalue().split(CLEAR) if part]
    assert drawn, out.getvalue()
    assert all(len(part) + len("^C") < out.columns for part in drawn), drawn
    assert drawn[0].endswith("…")  # cut, not dropped
    assert out.getvalue().endswith(CLEAR)
