"""A resumed gemini 0.61.0 draws a ready-looking input box before it replays the conversation, and
drops a paste sent during the replay: mam waits for the record the replay writes to the resumed
transcript (`{"$set": {"sessionId": ...}}`) before it takes the screen as ready.

The transcripts are written the way the real gemini wrote them in a real resume (record for record,
contents shortened); the screens are captured from it (tests/agents/screens/gemini-0.61.0/).
"""

from __future__ import annotations

import json
import os
import time
import types
import uuid
from datetime import datetime, timezone
from pathlib import Path

from mam.agents import get_adapter
from mam.agents.ready import wait_ready

SCREENS = Path(__file__).parent / "screens" / "gemini-0.61.0"
GEMINI = get_adapter("gemini")


def iso(at: float) -> str:
    return datetime.fromtimestamp(at, timezone.utc).isoformat(timespec="milliseconds").replace("+00:00", "Z")


class Chats:
    """A HOME whose ~/.gemini holds one project with the transcripts of one session id."""

    def __init__(self, home: Path) -> None:
        self.env = {"HOME": str(home)}
        self.cid = str(uuid.uuid4())
        self.dir = home / ".gemini" / "tmp" / "proj" / "chats"
        self.dir.mkdir(parents=True)

    def path(self, minute: str) -> Path:
        return self.dir / f"session-2026-12-01T{minute}-{self.cid[:8]}.jsonl"

    def append(self, path: Path, *records: dict[str, object], at: float | None = None) -> None:
        with open(path, "a", encoding="utf-8") as f:
            f.writelines(json.dumps(r) + "\n" for r in records)
        if at is not None:
            os.utime(path, (at, at))

    def header(self, started: float) -> dict[str, object]:
        return {"sessionId": self.cid, "projectHash": "0" * 64, "startTime": iso(started), "kind": "main"}

    def first_run(self, path: Path, started: float) -> None:
        """A launch with one turn, long before the resume."""
        self.append(
            path,
            self.header(started),
            {"$set": {"messages": []}},
            {"id": "u1", "type": "user", "content": [{"text": "Say hello."}]},
            {"$set": {"lastUpdated": iso(started + 2)}},
            at=started + 2,
        )

    def pending(self, since: float) -> bool:
        return GEMINI.replay_pending(self.cid, env=self.env, since=since)


def test_a_fresh_launch_has_nothing_to_replay(tmp_path: Path) -> None:
    chats = Chats(tmp_path)
    launched = time.time()
    assert not chats.pending(launched)  # nothing written yet
    chats.first_run(chats.path("13-35"), launched + 1)
    assert not chats.pending(launched)  # its own transcript starts after the launch
    assert not GEMINI.replay_pending(None, env=chats.env, since=launched)


def test_a_resume_is_pending_until_the_resumed_transcript_gets_its_sessionid_record(tmp_path: Path) -> None:
    chats = Chats(tmp_path)
    launched = time.time()
    original = chats.path("13-35")
    chats.first_run(original, launched - 600)
    assert chats.pending(launched)  # the box may show: the conversation is not back yet
    # its config initialized: a transcript of its own, named for another minute
    chats.append(chats.path("13-45"), chats.header(launched + 2), {"$set": {"messages": []}}, at=launched + 2)
    assert chats.pending(launched)
    # the replay ends: the resumed transcript gets the record
    chats.append(original, {"$set": {"sessionId": chats.cid}}, {"$set": {"messages": []}}, at=launched + 4)
    assert not chats.pending(launched)


def test_an_earlier_resumes_record_does_not_count(tmp_path: Path) -> None:
    """Resumed within the same minute it was written, gemini appends its new header to the resumed
    file itself: the file changes at once, and only a record after that header says the replay is done."""
    chats = Chats(tmp_path)
    launched = time.time()
    original = chats.path("13-35")
    chats.first_run(original, launched - 30)
    chats.append(original, {"$set": {"sessionId": chats.cid}}, at=launched - 20)  # an earlier resume
    chats.append(original, chats.header(launched + 2), {"$set": {"messages": []}}, at=launched + 2)
    assert chats.pending(launched)
    chats.append(original, {"$set": {"sessionId": chats.cid}}, at=launched + 4)
    assert not chats.pending(launched)


class _Pane:
    """A pane that always shows the box; the conversation counts as loaded after `loading_s`."""

    def __init__(self, screen: str, loading_s: float) -> None:
        self.screen, self.loading_s = screen, loading_s
        self.started = time.monotonic()
        self.loaded_at: float | None = None

    def pane(self, pane_id: str) -> object:
        return types.SimpleNamespace(dead=False, pid=None)

    def capture(self, pane_id: str, lines: int = 0) -> str:
        return self.screen

    def loading(self) -> bool:
        if time.monotonic() - self.started < self.loading_s:
            return True
        self.loaded_at = self.loaded_at or time.monotonic()
        return False


def test_wait_ready_counts_the_settle_time_only_once_the_conversation_is_back() -> None:
    screen = (SCREENS / "resume-before-replay.txt").read_text(encoding="utf-8")
    assert GEMINI.is_ready(screen)  # the screen alone cannot tell
    pane = _Pane(screen, loading_s=0.5)
    assert wait_ready(pane, "%1", GEMINI, timeout=20, loading=pane.loading)
    assert pane.loaded_at is not None
    assert time.monotonic() - pane.loaded_at >= GEMINI.ready_settle_s


def test_wait_ready_gives_up_while_the_conversation_never_comes_back() -> None:
    pane = _Pane((SCREENS / "resume-before-replay.txt").read_text(encoding="utf-8"), loading_s=60)
    assert not wait_ready(pane, "%1", GEMINI, timeout=0.5, loading=pane.loading)


def test_the_replay_screen_is_not_ready() -> None:
    replaying = (SCREENS / "resume-replaying.txt").read_text(encoding="utf-8")
    assert "Resuming session..." in replaying and not GEMINI.is_ready(replaying)
    assert GEMINI.is_ready((SCREENS / "resume-replayed.txt").read_text(encoding="utf-8"))
