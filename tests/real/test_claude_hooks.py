"""Claude Code 2.1.332's lifecycle hooks, as mam installs them per session (`--settings` file), with
the real program against the scripted Anthropic server. One session for all of it:

(a) the hooks drive `activity`: working while a tool call runs (PreToolUse), idle after the turn (Stop);
(b) a model that ends its turn without reporting gets exactly one reminder, typed into Claude's input,
    and then reports: exit 0, the brief pasted once;
(c) a model that never reports: MAM_REMINDERS reminders, then `ended_without_report`, exit 1.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pytest

from mam.jobs.record import read_audit
from mam.util.poll import wait_for
from tests.real import _scenario as sc
from tests.real.anthropic_server import (
    Block,
    FooterScript,
    Text,
    ToolUse,
    conversation,
    footer_commands,
    is_main_turn,
    text_of,
)
from tests.real.conftest import Rig, skip_module_without

skip_module_without("claude")
pytestmark = pytest.mark.timeout(420)

REMINDER = "is still open: you have not reported on it"


@dataclass
class ForgetfulScript(FooterScript):
    """Answers a brief with a text only (the turn ends, nothing reported); answers mam's reminder by
    running the commands it names (`obey`), or with a text again."""

    obey: bool = True

    def __call__(self, body: dict[str, Any]) -> list[Block]:
        if not is_main_turn(body):
            return [Text("Scripted title")]
        for message in reversed(conversation(body)):
            text = text_of(message.get("content")) if message.get("role") == "user" else ""
            if not footer_commands(text, ("started", "completed")):
                continue
            if REMINDER in text and self.obey:
                return super().__call__(body)
            return [Text("I had a look; that is all for now.")]
        return [Text("Nothing to do.")]


def kinds(rig: Rig, job_id: str) -> list[str]:
    return [str(line.get("kind")) for line in read_audit(rig.ws, job_id)]


def activity_inputs(rig: Rig, job_id: str) -> list[dict[str, Any]]:
    inputs = [line["input"] for line in read_audit(rig.ws, job_id) if line.get("kind") == "input"]
    return [i["body"] for i in inputs if i.get("input") == "event" and i.get("type") == "activity"]


def test_hooks_drive_activity_remind_once_and_end_a_job_never_reported(claude_rig: Rig) -> None:
    rig = claude_rig
    rig.env.update({"MAM_REMIND_AFTER_S": "3", "MAM_REMINDERS": "2"})
    row = rig.create("hooks")
    first = rig.status("hooks")
    assert first["activity_source"] == "hook" and first["activity"] == "idle", first  # SessionStart

    # (a) a job that reports: the hooks said working for each tool call, and idle after the turn
    d = sc.delegate_completed(rig, "hooks", "Say hello.")
    trail = activity_inputs(rig, d.record["id"])
    assert ("working", "UserPromptSubmit") in [(a["state"], a["source"]) for a in trail], trail
    tools = [a.get("tool", "") for a in trail if a["source"] == "PreToolUse"]
    assert any(t.startswith(f"Bash(mam event started --job {d.record['id']} ") for t in tools), tools
    # the job's usage: the tokens the server sent for the job's model messages (the three tool calls;
    # the closing text comes after `completed` ended the job), token for token, from Claude's transcript
    asked = [
        r for r in rig.model.snapshot()[d.model_from :]
        if any(isinstance(b, ToolUse) and d.record["id"] in str(b.input.get("command")) for b in r.reply)
    ]  # fmt: skip
    assert len(asked) == 3, asked
    usage = d.record["usage"]
    assert usage["source"] == "claude-transcript" and usage["messages"] == 3, usage
    assert usage["input_tokens"] == sum(r.usage["input_tokens"] for r in asked), usage
    assert usage["output_tokens"] == sum(r.usage["output_tokens"] for r in asked), usage
    assert usage["cache_read_tokens"] == sum(r.usage["cache_read_input_tokens"] for r in asked), usage
    assert usage["cache_write_tokens"] == sum(r.usage["cache_creation_input_tokens"] for r in asked), usage
    idle = wait_for(lambda: rig.status("hooks") if rig.status("hooks")["activity"] == "idle" else None, timeout=30)
    assert idle["activity_source"] == "hook", idle

    # (b) the turn ends without a report: one reminder, then the model reports
    rig.model.reset(ForgetfulScript(obey=True))
    d = sc.delegate(rig, "hooks", "Check the README.")
    assert d.rc == 0 and d.record.get("state") == "completed", sc.explain(rig, "hooks", d)
    seen = kinds(rig, d.record["id"])
    assert seen.count("reminded") == 1 and seen.count("injected") == 1, seen
    prompts = [text_of(m.get("content")) for m in conversation(rig.model.main_requests()[-1].body)]
    assert sum(d.tag in p for p in prompts) == 1, "the brief was pasted again"
    assert sum(REMINDER in p and d.record["id"] in p for p in prompts) == 1, prompts

    # (c) never reported: two reminders, then ended_without_report, long before the wall clock
    rig.model.reset(ForgetfulScript(obey=False))
    d = sc.delegate(rig, "hooks", "Check the README again.", timeout=300)
    assert d.rc == 1 and d.record.get("reason") == "ended_without_report", sc.explain(rig, "hooks", d)
    assert kinds(rig, d.record["id"]).count("reminded") == 2
    assert rig.pane_alive(row["pane_id"])
