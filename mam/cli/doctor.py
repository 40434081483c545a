"""`mam doctor`: check the workspace; `--restore-from-mirror` rebuilds the sessions table after you confirm."""

from __future__ import annotations

from pathlib import Path

import click

from mam import doctor as lib
from mam.cli.common import App, echo, echo_json, workspace_option
from mam.errors import UsageError
from mam.outcomes import Exit
from mam.settings import load_settings
from mam.workspace import find_workspace


@click.command("doctor")
@workspace_option
@click.option(
    "--restore-from-mirror",
    "restore",
    is_flag=True,
    help="Rebuild a damaged registry's sessions table from .mam/agent-sessions.yaml (asks first).",
)
@click.option("--yes", is_flag=True, help="With --restore-from-mirror: do not ask.")
@click.option(
    "--json", "as_json", is_flag=True, help="Print {workspace, ok, checks: [{name, status, detail}]} as JSON."
)
@click.pass_obj
def doctor(app: App, restore: bool, yes: bool, as_json: bool) -> int:
    """Check this workspace: owners and modes of .mam.env and .mam/, the settings, the registry's
    integrity, the YAML mirror's agreement with it, the job records, the broker (the embedded one's
    state, or a configured one's port), tmux and its version, each agent CLI on the panes' PATH (its
    version, or missing: a failure when a session of the workspace runs it; a version other than the
    one mam was verified with is a warning naming what mam reads from its screen; none found: how to try
    mam with the demo agent), and each running
    session's pane (a dead or gone agent fails).

    Reads only, unless --restore-from-mirror: that moves a damaged registry aside (kept as
    agent-sessions.db.broken-<time>) and rebuilds its sessions from the mirror; the job history
    in the damaged file is not restored (job records and audit logs stay on disk).

    Exit codes: 0 nothing failed (warnings allowed); 1 a check failed, or the restore was declined;
    2 bad usage (e.g. --restore-from-mirror on a healthy registry).
    """

    if yes and not restore:
        raise UsageError("--yes goes with --restore-from-mirror")

    # Looking, a file others may write is a failed check, not a refusal; restoring writes, so it is refused.
    ws = find_workspace(app.workspace_arg, check=restore)
    env_file = Path(app.env_file_arg) if app.env_file_arg else ws.env_file

    def settings():  # type: ignore[no-untyped-def]
        return load_settings(env_file=env_file, required_env_file=bool(app.env_file_arg))

    if restore:
        plan = lib.plan_restore(ws)
        question = (
            f"Rebuild {plan.db} from {plan.mirror} ({len(plan.sessions)} sessions, generation {plan.generation})? "
            f"The damaged file is kept as {plan.aside}; its job history is not restored."
        )
        if not yes and not click.confirm(question, default=False, err=True):
            echo("mam: nothing changed", err=True)
            return Exit.FAILED
        count = lib.restore(ws, plan)
        echo(f"restored {count} sessions from {plan.mirror}; the damaged registry is {plan.aside}", err=True)
    report = lib.check(ws, load_settings=settings)
    if as_json:
        echo_json(report.as_dict())
    else:
        echo(f"workspace: {report.workspace}")
        for c in report.checks:
            echo(f"{c.status:<4}  {c.name}: {c.detail}")
    return Exit.OK if report.ok else Exit.FAILED
