"""`mam top`: a live full-screen view of sessions, open jobs and loops; `--snapshot` prints one."""

from __future__ import annotations

import os
import shutil
import sys

import click

from mam.broker import embedded
from mam.cli.common import App, echo, workspace_option
from mam.errors import BrokerError, MamError
from mam.outcomes import Exit


@click.command("top")
@workspace_option
@click.option(
    "--snapshot", is_flag=True, help="Print one rendering as plain text and exit (scripts, tests, bug reports)."
)
@click.option(
    "--width",
    type=click.IntRange(min=40),
    default=None,
    metavar="W",
    help="With --snapshot: cut lines at W columns (default: the terminal's width, else 120).",
)
@click.pass_obj
def top(app: App, snapshot: bool, width: int | None) -> int:
    """A live full-screen view of the workspace: sessions, open jobs, loops.

    \b
    Sessions: a state dot (● working, ◉ waiting for a person, ○ idle, ◌ starting,
      ■ stopped, ✕ terminated), where the state came from (hook, event, job, process,
      registry), the current job and the age of the last activity.
    Open jobs: age, time since the last event, a bar per deadline (start: delivery to
      `started`; liveness: K x N since the last event; wall: the budget), the last
      progress message, and the position in the session's queue.
    Loops: round and each reviewer's verdict so far.

    \b
    Keys: Enter attaches to the selected session's pane (as `mam session attach NAME`;
    detach with the tmux prefix, then d, to come back to top),
    c cancels the selected job, s stops the selected session (each asks first),
    h shows the HOSTS (every node on the broker, as `mam status --fleet`; arrows
    and Enter pick one and show its sessions and open jobs; h again hides them),
    / filters, Esc clears the filter, Tab moves between tables, q quits (Ctrl-C too, exit 130).

    It follows the broker (reloading when a job moves) and shows when the broker is
    down, reading the registry meanwhile. It never starts a broker, a pane or a session.

    \b
    Examples:
      mam top
      mam top --snapshot --width 120
    """
    if width is not None and not snapshot:
        raise click.UsageError("--width goes with --snapshot")
    if snapshot:
        from mam.view.model import snapshot as take
        from mam.view.render import plain

        echo(
            plain(
                take(app.ws, app.settings, broker=_broker_state(app)),
                width or shutil.get_terminal_size((120, 40)).columns,
            ),
            nl=False,
        )
        return Exit.OK
    from mam.view.top import TopApp

    result = TopApp(app.ws, app.settings).run()
    if result and result[0] == "attach":
        from mam.sessions.attach import attach

        attach(result[1], ws=app.ws, settings=app.settings)
        return Exit.OK
    # The view is closed and the terminal restored: end now rather than wait at interpreter exit for a
    # background thread (a loader or the broker's loop) that has nothing left to do.
    sys.stdout.flush()
    os._exit(Exit.INTERRUPTED if result and result[0] == "interrupted" else Exit.OK)


def _broker_state(app: App) -> str:
    """up / down, by connecting once (no autostart); `idle` when the broker is the workspace's embedded one and
    it does not run (a new workspace before its first job, or one whose node ended: nothing is wrong)."""
    from mam.bus.connect import open_client

    try:
        client = open_client(
            app.settings.with_overrides(MAM_NO_AUTOSTART="1"), app.ws, role="top", autostart=False, timeout=2
        )
    except BrokerError:
        if app.settings.brokers:
            return "down"
        try:
            return "down" if embedded.status(app.ws).running else "idle"
        except MamError:
            return "down"
    client.close()
    return "up"
