"""Fixtures for the real agent CLIs: the pinned executables, a scripted model, a wired workspace.

A real CLI runs in a real tmux pane started by mam's own CLI, with HOME in the test's temporary
folder (holding only what that CLI needs), talking to a scripted model server on 127.0.0.1 and
reporting through a real broker. When a pinned CLI is not in the cache the test is skipped with
one reason line naming it and the install command; nothing here downloads anything.
"""

from __future__ import annotations

import json
import os
import secrets
import subprocess
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from mam.util.poll import Timeout, wait_for
from mam.workspace import Workspace
from tests.helpers import brokers
from tests.helpers.jobs import FAST, capture
from tests.helpers.mamcli import mam
from tests.helpers.tmux import PrivateTmux
from tests.real.anthropic_server import AnthropicServer
from tests.real.clis import BY_NAME, cache_dir

CACHE = cache_dir()  # read at import, before any fixture points HOME elsewhere
INSTALL_HINT = "python3 -m tests.real.install_clis"


def missing_reason(name: str) -> str:
    """Why the pinned CLI cannot run here ("" when it can)."""
    cli = BY_NAME[name]
    exe = cli.executable(CACHE)
    have = cli.installed_version(CACHE)
    if exe is not None and have == cli.version:
        return ""
    state = "not installed" if exe is None else f"at {have}, not the pinned {cli.version}"
    return f"real {name} {cli.version} is {state} in {CACHE} (offline? install with: {INSTALL_HINT})"


def skip_module_without(name: str) -> None:
    """At a test module's top: skip the whole module, as one reported line, when the CLI is missing."""
    reason = missing_reason(name)
    if reason:
        pytest.skip(reason, allow_module_level=True)


def require_cli(name: str) -> Path:
    """The pinned CLI's executable, or skip the test saying what is missing."""
    reason = missing_reason(name)
    if reason:
        pytest.skip(reason)
    exe = BY_NAME[name].executable(CACHE)
    assert exe is not None
    return exe


@pytest.fixture(scope="session")
def real_broker(request: pytest.FixtureRequest) -> brokers.RunningBroker:
    """One broker for the real suite: Mosquitto when installed (CI installs it), else amqtt."""
    kind = "mosquitto" if brokers.mosquitto_bin() else "amqtt"
    return request.getfixturevalue(f"{kind}_broker")


@pytest.fixture
def anthropic_server() -> Iterator[AnthropicServer]:
    with AnthropicServer() as server:
        yield server


# A real CLI under the suite's load (six workers on two cores) can take longer than the 20 s default to show
# its ready screen: opencode once did at a fork (docs/agents.md, "Rules common to every adapter").
LOADED = {"MAM_READY_TIMEOUT_S": "60"}


@dataclass
class Rig:
    """One real CLI wired to a workspace: `rig.mam(...)` runs mam with the env panes inherit."""

    name: str
    exe: Path
    home: Path
    ws: Workspace
    tmux: PrivateTmux
    env: dict[str, str]
    model: Any  # the scripted model server
    sessions: list[str] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.env = {**LOADED, **self.env}

    def mam(
        self, *args: str, timeout: float = 120, check: bool = False, extra_env: dict[str, str] | None = None
    ) -> subprocess.CompletedProcess[str]:
        return mam(*args, env={**self.env, **(extra_env or {})}, timeout=timeout, check=check)

    def mam_json(self, *args: str, timeout: float = 120) -> Any:
        proc = self.mam(*args, "--json", timeout=timeout)
        assert proc.returncode == 0, (
            f"mam {' '.join(args)} exited {proc.returncode}\nstdout: {proc.stdout}\nstderr: {proc.stderr}"
        )
        return json.loads(proc.stdout)

    def create(self, session: str, *extra: str, cwd: Path | None = None) -> dict[str, Any]:
        args = ["session", "create", "--agent", self.name, "--role", "developer", "--session", session, *extra]
        if cwd is not None:
            args += ["--cwd", str(cwd)]
        row = self.mam_json(*args)
        self.sessions.append(session)
        return row

    def status(self, session: str) -> dict[str, Any]:
        rows = self.mam_json("session", "status")
        return next(r for r in rows if r["name"] == session)

    def screen(self, pane_id: str) -> str:
        return capture(self.tmux.name, pane_id)

    def shown(self, pane_id: str, lines: int = 40) -> str:
        """The pane's last non-blank lines, for failure messages."""
        return "\n".join([line for line in self.screen(pane_id).splitlines() if line.strip()][-lines:])

    def pane_alive(self, pane_id: str) -> bool:
        out = subprocess.run(
            ["tmux", "-L", self.tmux.name, "display-message", "-p", "-t", pane_id, "#{pane_dead}"],
            capture_output=True,
            text=True,
            check=False,
        )
        return out.returncode == 0 and out.stdout.strip() == "0"

    def wait_screen(self, pane_id: str, text: str, timeout: float = 30) -> str:
        def shows() -> str:
            screen = self.screen(pane_id)
            return screen if text in screen else ""

        return wait_for(shows, timeout=timeout, message=lambda: f"{text!r} not on screen:\n{self.shown(pane_id)}")

    def stop_all(self) -> None:
        """`mam session stop` every session this rig created (for CLIs a tmux kill would not end cleanly), all at
        once: one left at a prompt waits out its exit grace without holding up the others."""
        with ThreadPoolExecutor(max(1, len(self.sessions))) as pool:
            list(
                pool.map(
                    lambda s: self.mam("session", "stop", "--session", s, timeout=60), dict.fromkeys(self.sessions)
                )
            )


def claude_home(home: Path, api_key: str) -> None:
    """The least a fresh Claude Code needs to start without a login: onboarding done, the key approved."""
    (home / ".claude.json").write_text(
        json.dumps(
            {
                "hasCompletedOnboarding": True,
                "customApiKeyResponses": {"approved": [api_key[-20:]], "rejected": []},
            }
        )
    )


def claude_env(exe: Path, home: Path, base_url: str, api_key: str) -> dict[str, str]:
    return {
        "PATH": f"{exe.parent}{os.pathsep}{os.environ['PATH']}",
        "HOME": str(home),
        "TERM": os.environ.get("TERM") or "xterm-256color",
        "ANTHROPIC_API_KEY": api_key,
        "ANTHROPIC_BASE_URL": base_url,
        "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
        "DISABLE_TELEMETRY": "1",
        "CLAUDE_CODE_DISABLE_OFFICIAL_MARKETPLACE_AUTOINSTALL": "1",
        "DISABLE_AUTOUPDATER": "1",
    }


@pytest.fixture
def claude_rig(
    isolated_env: Path,
    workspace: Workspace,
    tmux_server: PrivateTmux,
    real_broker: brokers.RunningBroker,
    anthropic_server: AnthropicServer,
) -> Iterator[Rig]:
    """Claude Code 2.1.332 from the cache, a temp HOME made for it, the scripted Anthropic server,
    a workspace on a real broker."""
    exe = require_cli("claude")
    api_key = f"sk-ant-api03-{secrets.token_urlsafe(48)}"
    claude_home(isolated_env, api_key)
    env = {
        **real_broker.env(),
        **FAST,
        "MAM_TMUX_SERVER": tmux_server.name,
        "MAM_WORKSPACE": str(workspace.root),
        **claude_env(exe, isolated_env, anthropic_server.base_url, api_key),
    }
    # No `mam session stop` at the end: the tmux_server fixture's kill ends every pane's agent
    # (Claude exits on SIGHUP), and a stop would only wait on a pane left showing a prompt.
    yield Rig("claude", exe, isolated_env, workspace, tmux_server, env, anthropic_server)


# -- Claude's own records ---------------------------------------------------------------------------


def claude_transcript(home: Path, conversation_id: str) -> Path:
    found = sorted((home / ".claude" / "projects").glob(f"*/{conversation_id}.jsonl"))
    assert found, f"no transcript for {conversation_id} under {home / '.claude' / 'projects'}"
    return found[0]


def transcript_entries(transcript: Path) -> Iterator[Any]:
    """The JSON objects of a Claude transcript, one a line (a line that does not parse is skipped)."""
    for line in transcript.read_text().splitlines():
        try:
            entry = json.loads(line)
        except ValueError:
            continue
        yield entry


def prompts_holding(home: Path, conversation_id: str, text: str, timeout: float = 30.0) -> list[str]:
    """Claude's prompts once its transcript records one holding `text` (Claude appends to the transcript
    from a write queue, so the entry can land a moment after the job's own events), or as they are at
    the deadline: the caller's assertions then say what is missing."""
    found: list[str] = []

    def recorded() -> bool:
        found[:] = claude_prompts(claude_transcript(home, conversation_id))
        return any(text in p for p in found)

    try:
        wait_for(recorded, timeout=timeout, interval=0.2)
    except Timeout:
        pass
    return found


def claude_prompts(transcript: Path) -> list[str]:
    """The text of every prompt the person (here: mam's paste) submitted, in order; tool results excluded. A prompt
    submitted while Claude was still finishing a turn (mam types the next brief once the last job ended, which can
    be before the turn's closing text) is queued: Claude 2.1 records it as an attachment, `queued_command`, and
    answers it in that turn, with no user entry of its own (seen in one CI run of four); one that also gets a user
    entry later counts once."""
    prompts: list[str] = []
    queued: list[str] = []
    for entry in transcript_entries(transcript):
        attachment = entry.get("attachment")
        if entry.get("type") == "attachment" and isinstance(attachment, dict):
            if attachment.get("type") == "queued_command" and isinstance(attachment.get("prompt"), str):
                prompts.append(attachment["prompt"])
                queued.append(attachment["prompt"])
            continue
        message = entry.get("message")
        if entry.get("type") != "user" or not isinstance(message, dict) or entry.get("isMeta"):
            continue
        content = message.get("content")
        text = None
        if isinstance(content, str):
            text = content
        elif isinstance(content, list) and not any(
            isinstance(b, dict) and b.get("type") == "tool_result" for b in content
        ):
            text = "\n".join(str(b.get("text", "")) for b in content if isinstance(b, dict))
        if text is not None and text in queued:
            queued.remove(text)  # the user entry of a prompt already counted as queued
        elif text is not None:
            prompts.append(text)
    return prompts


def claude_usage(transcript: Path) -> dict[str, dict[str, Any]]:
    """The usage Claude recorded per model message (it repeats it on each content block's line: one per id)."""
    found: dict[str, dict[str, Any]] = {}
    for entry in transcript_entries(transcript):
        message = entry.get("message")
        if entry.get("type") == "assistant" and isinstance(message, dict) and message.get("id"):
            found[str(message["id"])] = dict(message.get("usage") or {})
    return found
