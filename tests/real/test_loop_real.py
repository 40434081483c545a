"""The review loop with real CLIs: Claude Code 2.1.332 creates in its own worktree, Codex 0.171.0
reviews, each driven by its scripted model server, the loop run through the skill's run_loop.sh
with --approve, and a person's approval merging the branch.

The scripts decide from each brief as mam wrote it: Claude's model answers the creation brief by
writing feature.txt (version 1) and committing it in its worktree, and the fix brief by writing
version 2 and committing; Codex's model writes the report file named in the review brief, ending
with NOT PASS in round 1 and PASS after. Every command runs through the CLI's own shell tool.
"""

from __future__ import annotations

import json
import os
import secrets
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from mam.util.poll import wait_for
from mam.workspace import Workspace
from tests.helpers import brokers
from tests.helpers.jobs import FAST
from tests.helpers.mamcli import MAM, mam
from tests.helpers.tmux import PrivateTmux
from tests.loop.gitrepo import git, make_repo
from tests.real import _codex_home as cx
from tests.real._loop_script import CREATE, FIX, RUN_LOOP, TASK, reviewer_steps
from tests.real.anthropic_server import (
    AnthropicServer,
    Block,
    FooterScript,
    Text,
    conversation,
    footer_commands,
    is_main_turn,
    text_of,
)
from tests.real.clis import BY_NAME
from tests.real.conftest import claude_env, claude_home, require_cli, skip_module_without
from tests.real.openai_server import ScriptedModel

skip_module_without("claude")
skip_module_without("codex")
pytestmark = pytest.mark.timeout(900)


def creator_script(body: dict[str, Any]) -> list[Block]:
    """Claude's model: the work the brief asks for (create or fix), then the footer's commands."""
    if not is_main_turn(body):
        return [Text("Scripted title")]
    brief = next(
        (
            text_of(t.get("content"))
            for t in reversed(conversation(body))
            if t.get("role") == "user" and footer_commands(text_of(t.get("content")))
        ),
        "",
    )
    work = (FIX,) if "[mam-loop: fix]" in brief else (CREATE,) if "[mam-loop: create]" in brief else ()
    return FooterScript(before=work, final_text="Done.")(body)


@pytest.fixture
def loop_rig(
    isolated_env: Path, workspace: Workspace, tmux_server: PrivateTmux, real_broker: brokers.RunningBroker
) -> Iterator[dict[str, Any]]:
    claude, codex = require_cli("claude"), require_cli("codex")
    api_key = f"sk-ant-api03-{secrets.token_urlsafe(48)}"
    claude_home(isolated_env, api_key)
    with AnthropicServer(creator_script) as anthropic:
        openai = ScriptedModel(more=reviewer_steps).start()
        try:
            cx.write_config(isolated_env / ".codex", base_url=openai.base_url)
            env = {
                **real_broker.env(),
                **FAST,
                "MAM_TMUX_SERVER": tmux_server.name,
                "MAM_WORKSPACE": str(workspace.root),
                **claude_env(claude, isolated_env, anthropic.base_url, api_key),
                "CODEX_HOME": str(isolated_env / ".codex"),
                cx.KEY_VAR: "dummy-key-for-tests",
            }
            env["PATH"] = os.pathsep.join([str(codex.parent), env["PATH"]])
            if os.geteuid() == 0:  # Claude refuses --dangerously-skip-permissions as root outside a sandbox
                env["IS_SANDBOX"] = "1"
            yield {"ws": workspace, "env": env, "anthropic": anthropic, "openai": openai, "home": isolated_env}
        finally:
            for session in ("creator", "rev"):
                mam("session", "stop", "--session", session, env=env, timeout=90)
            openai.stop()


def test_claude_creates_codex_reviews_not_pass_fix_pass_then_approved_and_merged(loop_rig: dict[str, Any]) -> None:
    ws, env = loop_rig["ws"], loop_rig["env"]
    make_repo(ws.root)
    base = git(ws.root, "rev-parse", "main")
    made = mam(
        "session", "create", "--agent", "claude", "--role", "developer", "--session", "creator", "--worktree",
        "--permissions", "full", "--json", env=env, timeout=120,
    )  # fmt: skip
    assert made.returncode == 0, made.stderr
    tree_dir = Path(json.loads(made.stdout)["worktree"])
    made = mam(
        "session", "create", "--agent", "codex", "--role", "reviewer", "--session", "rev", "--json",
        env=env, timeout=120,
    )  # fmt: skip
    assert made.returncode == 0, made.stderr

    loop = subprocess.Popen(
        [
            "bash", str(RUN_LOOP), "--creator", "creator", "--reviewer", "rev", "--task", TASK, "--approve",
            "--max-loop", "3", "--loop-id", "loop-real-1", "--start-deadline", "120", "--heartbeat", "10",
            "--timeout", "300", "--json",
        ],
        env={**os.environ, **env, "MAM_BIN": MAM},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )  # fmt: skip
    try:

        def waiting() -> dict[str, Any] | None:
            if loop.poll() is not None:
                out, err = loop.communicate()
                raise AssertionError(f"the loop ended ({loop.returncode}) instead of waiting:\n{out}\n{err}")
            proc = mam("loop", "status", "loop-real-1", "--json", env=env)
            row = json.loads(proc.stdout) if proc.returncode == 0 else {}
            return row if row.get("state") == "needs_approval" else None

        row = wait_for(waiting, timeout=600, interval=1.0)
        verdicts = [[(r["reviewer"], r["verdict"]) for r in h["reviews"]] for h in row["history"]]
        assert verdicts == [[("rev", "NOT PASS")], [("rev", "PASS")]], row["history"]
        identity = row["approval"]["identity"]
        assert identity["base"] == base and identity["head"] == git(tree_dir, "rev-parse", "HEAD")
        assert (tree_dir / "feature.txt").read_text() == "version 2\n"
        assert git(tree_dir, "log", "--format=%s", f"{base}..HEAD").splitlines() == [
            "feature.txt: version 2",
            "add feature.txt",
        ]
        fix = (ws.state / "loops" / "loop-real-1" / "round-1" / "brief-fix-creator.md").read_text()
        assert "the task asks for 'version 2'" in fix  # Codex's finding reached Claude

        approved = mam("loop", "approve", "loop-real-1", env=env)
        assert approved.returncode == 0, approved.stderr
        out, err = loop.communicate(timeout=120)
    finally:
        if loop.poll() is None:
            loop.kill()
            loop.communicate()
    assert loop.returncode == 0, err
    summary = json.loads(out)
    assert summary["state"] == "approved" and summary["approval"]["merged"] == identity["head"]
    assert git(ws.root, "rev-parse", "main^{tree}") == identity["tree"]
    assert (ws.root / "feature.txt").read_text() == "version 2\n"
    versions = {name: BY_NAME[name].version for name in ("claude", "codex")}
    assert versions == {"claude": "2.1.332", "codex": "0.171.0"}
