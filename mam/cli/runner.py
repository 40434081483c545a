"""`mam runner --name NAME`: take remote jobs for this host's sessions."""

from __future__ import annotations

import signal

import click

from mam.cli.common import App, echo, workspace_option
from mam.remote.runner import Runner
from mam.sessions.common import check_name


@click.command("runner")
@workspace_option
@click.option("--name", required=True, help="This runner's name (the RUNNER in remote:RUNNER/SESSION).")
@click.option("--once", is_flag=True, help="Exit after the jobs taken so far have ended (for tests and scripts).")
@click.option("--max-jobs", type=int, default=None, help="Take at most this many jobs.")
@click.option("--idle-exit", type=float, default=None, help="Exit after this many seconds with nothing to do.")
@click.option(
    "--allow-insecure-broker", is_flag=True, help="Run on a broker connection with neither TLS nor authentication."
)
@click.pass_obj
def runner(
    app: App, name: str, once: bool, max_jobs: int | None, idle_exit: float | None, allow_insecure_broker: bool
) -> None:
    """Serve remote jobs: dispatches signed with MAM_DISPATCH_SECRET, for this runner, fresh and new.

    \b
    It announces itself (retained presence, last will "offline"), takes each valid
    dispatch once, injects the brief into its own session once and relays the job's
    events to the broker. SIGTERM / SIGINT stop it cleanly.
    Exit codes: 0 stopped; 2 bad settings (no MAM_DISPATCH_SECRET, insecure broker);
    3 broker unavailable; 4 a runner of that name already runs in this workspace or is online
    elsewhere on this broker.
    """

    r = Runner(check_name(name, "runner name"), ws=app.ws, settings=app.settings, allow_insecure=allow_insecure_broker)
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: r.stop())
    echo(f"runner {name} serving workspace {app.ws.root}", err=True)
    r.run(once=once, max_jobs=max_jobs, idle_exit_s=idle_exit)
