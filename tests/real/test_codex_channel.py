"""The real codex (0.171.0) taking a job's brief through its own app-server (mam.agents.codex_server)
rather than a paste: the TUI in the pane is a client (`--remote unix://...`) of an app-server mam
starts for that launch alone; the brief reaches codex's rollout exactly once, as a turn the pane
shows; a resumed session gets a new app-server and takes its briefs the same way; with the socket
gone the paste is used instead, once; an approval prompt on the screen means no delivery. The
app-server never outlives the pane: a stop, a killed pane and a killed agent each end it.
"""

from __future__ import annotations

import os
import signal
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from mam.agents import codex_server
from mam.hooks import session_state
from mam.util.poll import wait_for
from tests.helpers import brokers
from tests.real import _codex_home as cx
from tests.real import _scenario as sc
from tests.real.conftest import Rig, skip_module_without

skip_module_without("codex")
pytestmark = [pytest.mark.timeout(600)]


@pytest.fixture(scope="module")
def rig(tmp_path_factory: pytest.TempPathFactory, real_broker: brokers.RunningBroker) -> Iterator[Rig]:
    with cx.module_rig(tmp_path_factory, real_broker) as r:
        yield r


def audit(rig: Rig, job_id: str) -> list[dict[str, Any]]:
    return list(rig.mam_json("job", "log", job_id))


def kinds(lines: list[dict[str, Any]]) -> list[str]:
    return [str(line.get("kind")) for line in lines]


def vias(rig: Rig, d: sc.Delegation) -> list[Any]:
    return [line.get("via") for line in audit(rig, d.record["id"]) if line.get("kind") == "injected"]


def sock_of(rig: Rig, session: str) -> Path:
    return rig.ws.session_dir(session) / codex_server.CHANNEL_DIR / codex_server.SOCKET


def servers(sock: Path) -> list[int]:
    """The pids of the app-servers listening on `sock` (codex's node wrapper and its native child)."""
    found = []
    for proc in Path("/proc").iterdir():
        try:
            argv = (proc / "cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        if b"app-server" in argv and f"unix://{sock}".encode() in argv:
            found.append(int(proc.name))
    return found


def told(rig: Rig, session: str, tag: str) -> int:
    """How many user messages of the session's codex conversation hold `tag`."""
    conversation = rig.status(session)["conversation_id"]
    assert conversation, rig.status(session)
    rollout = cx.rollout_of(rig.home / ".codex", conversation)
    return 0 if rollout is None else cx.user_turns_holding(rollout, tag)


def gone(sock: Path, timeout: float = 30) -> None:
    wait_for(lambda: not servers(sock), timeout=timeout, message=lambda: f"app-server still runs: {servers(sock)}")


def test_the_brief_is_a_turn_started_through_codexs_app_server_exactly_once(rig: Rig) -> None:
    session = "cx-channel"
    row = rig.create(session, cwd=sc.git_folder(rig.ws.root / "channel-repo"))
    sock = sock_of(rig, session)
    assert sock.stat().st_mode & 0o777 == 0o600 and sock.parent.stat().st_mode & 0o777 == 0o700
    running = servers(sock)
    assert running and row["pane_pid"] not in running, running

    first = sc.delegate_completed(rig, session, "Say hello.")
    lines = audit(rig, first.record["id"])
    assert vias(rig, first) == ["channel"] and "channel_unavailable" not in kinds(lines), kinds(lines)
    assert told(rig, session, first.tag) == 1
    pane = rig.status(session)["pane_id"]
    assert first.tag in rig.screen(pane), rig.shown(pane)  # the person sees the brief in the TUI
    # The app-server runs the turns, so it got mam's `-c notify=[...]`: `mam hook codex` ran at the turn's end.
    conversation = rig.status(session)["conversation_id"]
    wait_for(
        lambda: session_state.read(rig.ws, session).get("conversation_id") == conversation,
        timeout=30,
        message=lambda: f"no turn-end hook for {conversation}: {session_state.read(rig.ws, session)}",
    )
    assert session_state.read(rig.ws, session)["source"] == "notify"

    second = sc.delegate_completed(rig, session, "Say hello again.")
    assert vias(rig, second) == ["channel"]
    assert (told(rig, session, first.tag), told(rig, session, second.tag)) == (1, 1)

    # A stop ends the app-server with the TUI; a resume starts a new one on the same thread.
    assert sc.stop_keeping_conversation(rig, session) == conversation
    gone(sock)
    sc.resume(rig, session)
    assert servers(sock)
    third = sc.delegate_completed(rig, session, "Say hello once more.")
    assert vias(rig, third) == ["channel"] and rig.status(session)["conversation_id"] == conversation
    assert [told(rig, session, d.tag) for d in (first, second, third)] == [1, 1, 1]


def test_with_the_socket_gone_the_brief_is_pasted_once(rig: Rig) -> None:
    session = "cx-paste"
    rig.create(session, cwd=sc.git_folder(rig.ws.root / "paste-repo"))
    sock_of(rig, session).unlink()  # the server runs on; nothing can reach it

    d = sc.delegate_completed(rig, session, "Say hello.")
    lines = audit(rig, d.record["id"])
    assert "channel_unavailable" in kinds(lines) and vias(rig, d) == ["paste"], kinds(lines)
    assert told(rig, session, d.tag) == 1


def test_an_approval_prompt_on_the_screen_means_no_delivery_through_the_channel_either(rig: Rig) -> None:
    session = "cx-dialog"
    rig.create(session, cwd=sc.git_folder(rig.ws.root / "dialog-repo"))
    outside = rig.home.parent / "outside-channel"
    first = sc.delegate(rig, session, f"Touch a file outside. {{tag}}\nRUN-ESCALATED: touch {outside}", timeout=25)
    pane, screen = sc.left_waiting(rig, session, first)
    assert cx.APPROVAL_TEXT in screen, rig.shown(pane)

    second = sc.delegate(rig, session, "Say hello.", timeout=60, start_deadline=30)
    lines = audit(rig, second.record["id"])
    assert second.rc != 0 and "injected" not in kinds(lines), (second.record, kinds(lines))
    assert told(rig, session, second.tag) == 0
    assert cx.APPROVAL_TEXT in rig.screen(pane) and not outside.exists(), rig.shown(pane)


def test_a_killed_pane_or_a_killed_agent_leaves_no_app_server(rig: Rig) -> None:
    rig.create("cx-kill", cwd=sc.git_folder(rig.ws.root / "kill-repo"))
    sock = sock_of(rig, "cx-kill")
    assert servers(sock)
    pane = rig.status("cx-kill")["pane_id"]
    subprocess.run(["tmux", "-L", rig.tmux.name, "kill-pane", "-t", pane], check=True)
    gone(sock)

    row = rig.create("cx-crash", cwd=sc.git_folder(rig.ws.root / "crash-repo"))
    sock = sock_of(rig, "cx-crash")
    assert servers(sock)
    os.kill(row["pane_pid"], signal.SIGKILL)  # no handler runs: only the kernel's parent-death signal
    gone(sock)
