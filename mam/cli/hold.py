"""`mam pause --all` and `mam resume --all`: the workspace's kill switch (mam/jobs/pause.py)."""

from __future__ import annotations

from typing import Any

import click

from mam.cli.common import App, echo, echo_json, node_value, workspace_option
from mam.errors import UsageError

BY_HELP = "Who asks, for the audit log (default: user@host)."


def _need_all(everything: bool, verb: str) -> None:
    if not everything:
        raise UsageError(f"`mam {verb}` acts on the whole workspace and needs --all; one job: `mam job {verb} ID`")


def _skipped(out: dict[str, Any], key: str) -> None:
    for item in out[key]:
        echo(f"  {item['id']}: {item['why']}", err=True)


@click.command("pause")
@workspace_option
@click.option("--all", "everything", is_flag=True, help="Every open job, and a hold on the whole workspace.")
@click.option(
    "--mode",
    type=click.Choice(["safe", "quick", "hard"]),
    default="safe",
    show_default=True,
    help="How each open job is paused (see `mam job pause --help`).",
)
@click.option("--by", default=None, help=BY_HELP)
@click.option("--json", "as_json", is_flag=True, help="Print {hold, paused, skipped} as JSON.")
@click.pass_obj
def pause(app: App, everything: bool, mode: str, by: str | None, as_json: bool) -> None:
    """Hold the workspace: pause every open job in --mode, and type no brief anywhere until `mam resume --all`.

    While held, new delegations wait `queued` (queued_for: hold; their --dispatch-wait still applies),
    routines do not fire and loops start no round. The hold is kept in the registry: it survives the
    node's restart, a kill -9 of anything and a reboot of the workspace's processes.

    \b
    Exit codes: 0 held; 2 without --all.
    """
    _need_all(everything, "pause")
    out = node_value(app, "hold", {"mode": mode, "by": by})
    if as_json:
        echo_json(out)
        return
    echo(f"workspace held ({out['hold']['mode']}); {len(out['paused'])} job(s) paused; release: mam resume --all")
    _skipped(out, "skipped")


@click.command("resume")
@workspace_option
@click.option("--all", "everything", is_flag=True, help="Release the hold and resume every paused job.")
@click.option("--by", default=None, help=BY_HELP)
@click.option("--json", "as_json", is_flag=True, help="Print {released, resumed, failed} as JSON.")
@click.pass_obj
def resume(app: App, everything: bool, by: str | None, as_json: bool) -> None:
    """Release the workspace's hold and resume every paused job (each as `mam job resume` does).

    \b
    Exit codes: 0 released (a job that could not be resumed is listed and stays paused); 2 without --all.
    """
    _need_all(everything, "resume")
    out = node_value(app, "release", {"by": by})
    if as_json:
        echo_json(out)
        return
    said = "hold released" if out["released"] else "no hold"
    echo(f"{said}; {len(out['resumed'])} job(s) resumed")
    _skipped(out, "failed")
