"""gemini's fork: a copy of the source's transcripts under the new id (mam.agents.gemini copy_conversation),
on transcripts shaped as gemini 0.61.0 writes them (tests/real/test_gemini.py resumes such a copy)."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest

from mam.agents import get_adapter

SRC = "fcce0aee-f97f-43fd-85a3-9c34990303d7"
NEW = "230c5e95-2a40-4527-b208-a7832c891289"


def transcript(home: Path, cwd: str, name: str, lines: list[str]) -> Path:
    chats = home / ".gemini" / "tmp" / "proj" / "chats"
    chats.mkdir(parents=True, exist_ok=True)
    path = chats / name
    path.write_text("".join(line + "\n" for line in lines), encoding="utf-8")
    return path


def test_the_copy_names_the_new_id_and_keeps_every_other_line(tmp_path: Path) -> None:
    cwd = str(tmp_path / "repo")
    head = {"sessionId": SRC, "projectHash": hashlib.sha256(cwd.encode()).hexdigest(), "startTime": "x", "kind": "main"}
    message = '{"id":"m1","type":"user","content":[{"text":"brief \\u00e9 ' + SRC + '"}]}'
    lines = [json.dumps(head, separators=(",", ":")), message, '{"$set":{"sessionId":"' + SRC + '"}}', "{half"]
    source = transcript(tmp_path, cwd, f"session-2026-12-06T11-07-{SRC[:8]}.jsonl", lines)
    env = {"HOME": str(tmp_path)}
    written = get_adapter("gemini").copy_conversation(SRC, NEW, cwd=cwd, env=env)
    assert written == [source.with_name(f"session-2026-12-06T11-07-{NEW[:8]}.jsonl")]
    copied = written[0].read_text(encoding="utf-8").splitlines()
    assert json.loads(copied[0]) == {**head, "sessionId": NEW}
    assert copied[1:] == [message, "{half"]  # the resume marker left out, the rest byte for byte
    assert written[0].stat().st_mode & 0o777 == 0o600
    assert source.read_text(encoding="utf-8").splitlines() == lines  # the source untouched
    assert get_adapter("gemini").conversation_exists(NEW, cwd=cwd, env=env)
    with pytest.raises(FileExistsError):  # never over an existing file
        get_adapter("gemini").copy_conversation(SRC, NEW, cwd=cwd, env=env)
