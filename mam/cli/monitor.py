"""`mam monitor` (reconcile.sh): the workspace's reconciler."""

from __future__ import annotations

import signal

import click

from mam.cli.common import App, echo, echo_json, workspace_option
from mam.monitor.main import Monitor
from mam.outcomes import Exit


@click.command("monitor")
@workspace_option
@click.option(
    "--subscribe", is_flag=True, help="Also follow job events over MQTT (polling stands in while the broker is down)."
)
@click.option("--once", is_flag=True, help="Run one reconciliation pass and exit.")
@click.option("--interval", type=float, default=None, help="Seconds between passes (default MAM_MONITOR_INTERVAL_S).")
@click.option("--json", "as_json", is_flag=True, help="With --once: print the repairs as a JSON list.")
@click.pass_obj
def monitor(app: App, subscribe: bool, once: bool, interval: float | None, as_json: bool) -> int:
    """Repair registry drift: dead panes/agents marked terminated, unknown live agent panes registered
    (never the orchestrator's own), orphaned jobs closed by their deadlines.

    \b
    One monitor per workspace. It never starts a broker, a server or a pane.
    Every repair is logged with its reason to .mam/monitor.jsonl (and printed).
    Exit codes: 0 done (or stopped by SIGTERM); 130 stopped by Ctrl-C (SIGINT); 4 a monitor already
    runs here.
    """

    m = Monitor(
        app.ws,
        app.settings,
        subscribe=subscribe,
        interval=interval,
        echo=None if as_json else lambda s: echo(s, err=not once),
    )
    interrupted: list[int] = []

    def stop(signum: int, _frame: object) -> None:
        if signum == signal.SIGINT:
            interrupted.append(signum)
        m.stop()

    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, stop)
    repairs = m.run(once=once)
    if as_json:
        echo_json(repairs)
    elif once and not repairs:
        echo("no drift")
    return Exit.INTERRUPTED if interrupted else Exit.OK
