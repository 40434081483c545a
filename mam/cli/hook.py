"""`mam hook AGENT --session NAME`: what an agent CLI's lifecycle hook runs (written by mam into the
session's own hook settings; see docs/agents.md, "Lifecycle hooks").

Reads the hook's JSON on stdin (or as the last argument: codex's `notify` passes it so), records
the session's activity and, for its open job, a signed `activity` event. Always exits 0, within a
few seconds, printing nothing: a hook must never block or fail the agent.
"""

from __future__ import annotations

import os

import click


@click.command("hook", context_settings={"ignore_unknown_options": True})
@click.argument("agent")
@click.option("--session", default="", help="The mam session the hook belongs to (default: $MAM_SESSION).")
@click.option("--workspace", "workspace", default="", help="The workspace (default: $MAM_WORKSPACE).")
@click.argument("payload", required=False)
def hook(agent: str, session: str, workspace: str, payload: str | None) -> None:
    """Record one hook call of AGENT's CLI (JSON on stdin, or PAYLOAD). Always exits 0."""

    from mam.hooks.run import main

    main(agent, session or os.environ.get("MAM_SESSION", ""), workspace, payload)
