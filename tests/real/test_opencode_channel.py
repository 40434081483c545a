"""The real opencode (1.18.33) taking a job's brief through its own server (mam.agents.opencode_server)
rather than a paste: the brief reaches opencode exactly once (counted in opencode.db), as a turn the
TUI in the pane shows; with the server unreachable the paste is used instead, once. That a permission
prompt on the screen means no delivery, through the channel or the paste, is the second half of
tests/real/test_opencode.py's prompt test (the same opencode set-up: one wait for a job's timeout, not two).
"""

from __future__ import annotations

import json
import os
import socket
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from mam.agents import get_adapter, opencode_server
from tests.helpers import brokers
from tests.real import _opencode_home as oc
from tests.real import _scenario as sc
from tests.real.conftest import Rig, skip_module_without
from tests.real.openai_server import ScriptedModel

skip_module_without("opencode")
pytestmark = [pytest.mark.timeout(900)]

START_S, JOB_S = 150, 300


@pytest.fixture(scope="module")
def rig(tmp_path_factory: pytest.TempPathFactory, real_broker: brokers.RunningBroker) -> Iterator[Rig]:
    with sc.module_rig(
        "opencode", tmp_path_factory, real_broker, ScriptedModel, env=lambda root, model: dict(oc.ENV)
    ) as r:
        # The user's opencode asks before every bash command: mam's `report` lets `mam event` through.
        oc.write_config(r.home / ".config", base_url=r.model.base_url, permission={"bash": {"*": "ask"}})
        yield r


def audit(rig: Rig, job_id: str) -> list[dict[str, Any]]:
    return list(rig.mam_json("job", "log", job_id))


def kinds(lines: list[dict[str, Any]]) -> list[str]:
    return [str(line.get("kind")) for line in lines]


def injected(lines: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [line for line in lines if line.get("kind") == "injected"]


def told(rig: Rig, session: str, tag: str) -> int:
    """How many of the session's user messages in opencode.db hold `tag` (a pasted brief's session is
    found as mam finds it, by its folder: one session per folder here)."""
    row = rig.status(session)
    conversation = row["conversation_id"] or get_adapter("opencode").discover(cwd=row["cwd"], since=0.0, env=rig.env)
    assert conversation, row
    texts = oc.user_texts(oc.db_path(rig.home / ".local" / "share"), conversation)
    return sum(tag in t for t in texts)


def channel_file(rig: Rig, session: str) -> Path:
    return rig.ws.session_dir(session) / opencode_server.CHANNEL_FILE


def test_the_brief_is_a_turn_started_through_opencodes_server_exactly_once(rig: Rig) -> None:
    session = "oc-channel"
    row = rig.create(session, cwd=sc.git_folder(rig.ws.root / "channel-repo"))
    path = channel_file(rig, session)
    assert path.stat().st_mode & 0o777 == 0o600
    channel = json.loads(path.read_text())
    # The server is behind the secret, and the secret is on no command line.
    with pytest.raises(urllib.error.HTTPError) as refused:
        urllib.request.urlopen(f"http://127.0.0.1:{channel['port']}/session", timeout=10)
    assert refused.value.code == 401
    cmdline = Path(f"/proc/{row['pane_pid']}/cmdline").read_bytes()
    assert channel["password"].encode() not in cmdline and str(channel["port"]).encode() in cmdline

    # A fresh TUI has no opencode session yet: the channel makes one, shows it, starts the turn.
    first = sc.delegate_completed(rig, session, "Say hello.", timeout=JOB_S, start_deadline=START_S)
    lines = audit(rig, first.record["id"])
    assert [line.get("via") for line in injected(lines)] == ["channel"], kinds(lines)
    assert "channel_unavailable" not in kinds(lines)
    assert told(rig, session, first.tag) == 1
    pane = rig.status(session)["pane_id"]
    assert first.tag in rig.screen(pane), rig.shown(pane)  # the person sees the brief in the TUI

    # The next job goes into the same conversation.
    second = sc.delegate_completed(rig, session, "Say hello again.", timeout=JOB_S, start_deadline=START_S)
    assert [line.get("via") for line in injected(audit(rig, second.record["id"]))] == ["channel"]
    assert (told(rig, session, first.tag), told(rig, session, second.tag)) == (1, 1)


def test_with_the_server_unreachable_the_brief_is_pasted_once(rig: Rig) -> None:
    session = "oc-paste"
    rig.create(session, cwd=sc.git_folder(rig.ws.root / "paste-repo"))
    path = channel_file(rig, session)
    data = json.loads(path.read_text())
    with socket.socket() as s:  # a loopback port nobody listens on
        s.bind(("127.0.0.1", 0))
        data["port"] = s.getsockname()[1]
    path.write_text(json.dumps(data))
    os.chmod(path, 0o600)

    d = sc.delegate_completed(rig, session, "Say hello.", timeout=JOB_S, start_deadline=START_S)
    lines = audit(rig, d.record["id"])
    assert "channel_unavailable" in kinds(lines), kinds(lines)
    assert [line.get("via") for line in injected(lines)] == ["paste"], kinds(lines)
    assert told(rig, session, d.tag) == 1
