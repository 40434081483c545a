"""The node's command line (in mam/cli's command table): `mam node [--name NAME]`, `mam node status
[--json]`, `mam node stop`; `mam runner` (an alias of
`mam node --name NAME`)."""

from __future__ import annotations

import json
import os
import signal
import time
from collections.abc import Callable
from typing import Any

import click

from mam.cli.common import App, echo, echo_json, workspace_option
from mam.errors import LockBusy
from mam.node import client
from mam.node.server import run_node
from mam.node.wire import SOCKET, STATUS
from mam.outcomes import Exit
from mam.sessions.common import check_name
from mam.util.proc import clean_path

NODE_HELP = """The workspace's node: one long-running process per host and workspace.

\b
It runs every `mam job delegate`, `mam job wait` and agent `mam event` of the workspace (the commands
hand it their argv and streams and print what it prints), holds each open job's attempt, reconciles
panes and orphaned jobs (as `mam monitor`), and with --name takes remote jobs for this host's
sessions (as `mam runner`), and fires the routines (`mam routine`). Commands that need it start it in
the background (unless MAM_NO_AUTOSTART=1 or MAM_NODE=0); that one ends once the workspace's tmux
server is gone, no job is open and no routine is enabled. Started by hand it runs until `mam node
stop`, SIGTERM or Ctrl-C. Jobs stay open when a node ends; the next node takes them over.

\b
Exit codes: 0 stopped (`mam node stop`, SIGTERM); 130 stopped by Ctrl-C (SIGINT); 2 bad settings
(with --name: no MAM_DISPATCH_SECRET, an insecure broker); 3 broker unavailable (--name); 4 another
node (or runner of that name) runs for this workspace.
"""

RUNNER_OPTIONS: list[Callable[[Any], Any]] = [
    click.option("--once", is_flag=True, help="With --name: exit after the remote jobs taken so far have ended."),
    click.option("--max-jobs", type=int, default=None, help="With --name: take at most this many remote jobs."),
    click.option("--idle-exit", type=float, default=None, help="With --name: exit after this many idle seconds."),
    click.option(
        "--allow-insecure-broker",
        is_flag=True,
        help="With --name: take remote jobs on a broker with neither TLS nor authentication.",
    ),
]


def runner_options(f: Any) -> Any:
    for option in reversed(RUNNER_OPTIONS):
        f = option(f)
    return f


@click.group("node", help=NODE_HELP, invoke_without_command=True)
@workspace_option
@click.option("--name", default=None, help="This host's runner name: take remote:NAME/SESSION jobs (as `mam runner`).")
@runner_options
@click.pass_context
def node(
    ctx: click.Context,
    name: str | None,
    once: bool,
    max_jobs: int | None,
    idle_exit: float | None,
    allow_insecure_broker: bool,
) -> int | None:
    if ctx.invoked_subcommand is not None:
        return None
    app: App = ctx.obj
    return serve(app, name, once=once, max_jobs=max_jobs, idle_exit=idle_exit, allow_insecure=allow_insecure_broker)


def serve(
    app: App, name: str | None, *, once: bool, max_jobs: int | None, idle_exit: float | None, allow_insecure: bool
) -> int:
    """Be the node (in the foreground), with a runner when `name` is given."""
    beside = on_stop = fleet = None
    if name:
        from mam.remote.runner import Runner

        runner = Runner(
            check_name(name, "runner name"), ws=app.ws, settings=app.settings, allow_insecure=allow_insecure
        )

        def beside() -> int:
            return runner.run(once=once, max_jobs=max_jobs, idle_exit_s=idle_exit)

        on_stop = runner.stop

        def fleet() -> list[dict[str, Any]]:
            return [row.as_dict() for row in runner.fleet.rows()]

    _let_go_of_an_idle_autostarted_node(app)
    # As an autostarted node (mam.node.client.node_environ): in the workspace's folder, and programs found
    # only in absolute PATH folders (this node serves every caller, and its helpers inherit its PATH).
    os.chdir(app.ws.root)
    os.environ["PATH"] = clean_path()
    interrupted: list[int] = []

    def on_ctrl_c(signum: int, _frame: object) -> None:
        interrupted.append(signum)  # a clean stop all the same (as SIGTERM), ending with 130
        os.kill(os.getpid(), signal.SIGTERM)

    signal.signal(signal.SIGINT, on_ctrl_c)

    def serving() -> None:  # said once its SIGTERM handler is in place: a Ctrl-C from then on is a clean stop
        echo(f"node{' ' + name if name else ''} serving workspace {app.ws.root}", err=True)

    code = run_node(
        app.ws, app.settings, name=name or "", beside=beside, on_stop=on_stop, fleet=fleet, on_serving=serving
    )
    if code == Exit.LOCK_BUSY:
        raise LockBusy(f"a node already runs for workspace {app.ws.root} (`mam node status`)")
    return Exit.INTERRUPTED if interrupted and code == Exit.OK else code


def _let_go_of_an_idle_autostarted_node(app: App) -> None:
    """A node started on demand with nothing to do steps aside for one started by hand."""
    path = str(app.ws.run_dir / SOCKET)
    status = client.ask(path, "status")
    if not status or not status.get("autostarted") or status.get("requests") or status.get("name"):
        return
    client.stop(path)


@node.command("status")
@workspace_option
@click.option("--json", "as_json", is_flag=True, help="Print the status as JSON.")
@click.pass_obj
def status(app: App, as_json: bool) -> int:
    """Whether the workspace's node runs: pid, started, name, broker (`broker`: brokers, in_use, problem,
    embedded, as in `mam broker status --json`), open jobs, commands in flight, the web page it serves
    (`web`: url, host, port, tls, since; null when none).

    Looking starts nothing. Exit codes: 0 a node runs; 5 none runs (--json: {"running": false}).
    """
    answer = client.ask(str(app.ws.run_dir / SOCKET), "status")
    if answer is None or "pid" not in answer:
        if as_json:
            echo_json({"running": False, **_last(app)})
        else:
            echo(f"no node runs for workspace {app.ws.root}")
        return Exit.NOT_FOUND
    answer = {"running": True, **answer}
    if as_json:
        echo_json(answer)
        return Exit.OK
    started = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(float(answer["started"])))
    broker = answer.get("broker") or {}
    in_use = broker.get("in_use") or ", ".join(broker.get("brokers") or []) or "-"
    echo(f"node pid {answer['pid']}, started {started}{', name ' + answer['name'] if answer['name'] else ''}")
    echo(f"  broker: {in_use}")
    echo(
        f"  open jobs: {len(answer['open_jobs'])}{': ' + ' '.join(answer['open_jobs']) if answer['open_jobs'] else ''}"
    )
    echo(f"  commands in flight: {len(answer['requests'])}")
    echo(f"  web page: {(answer.get('web') or {}).get('url') or '-'}")
    return Exit.OK


def _last(app: App) -> dict[str, Any]:
    try:
        return {"last": json.loads((app.ws.run_dir / STATUS).read_text())}
    except (OSError, ValueError):
        return {}


@node.command("stop")
@workspace_option
@click.pass_obj
def stop(app: App) -> int:
    """Stop the workspace's node. Open jobs stay open; the next node takes them over.

    Exit codes: 0 stopped (or none ran); 1 it did not stop within 15 s.
    """
    answer, gone = client.stop(str(app.ws.run_dir / SOCKET))
    if answer is None:
        echo(f"no node runs for workspace {app.ws.root}", err=True)
        return Exit.OK
    if gone:
        echo(f"node {answer.get('pid', '?')} stopped", err=True)
        return Exit.OK
    echo(f"mam: error: node {answer.get('pid', '?')} did not stop within {client.STOP_WAIT_S:.0f} s", err=True)
    return Exit.FAILED


@click.command("runner")
@workspace_option
@click.option("--name", required=True, help="This runner's name (the RUNNER in remote:RUNNER/SESSION).")
@runner_options
@click.pass_obj
def runner(
    app: App, name: str, once: bool, max_jobs: int | None, idle_exit: float | None, allow_insecure_broker: bool
) -> int:
    """An alias of `mam node --name NAME`: take remote jobs for this host's sessions.

    \b
    It announces itself (retained presence, last will "offline"), takes each valid dispatch signed
    with MAM_DISPATCH_SECRET, for this runner, fresh and new, once; injects the brief into its own
    session once and relays the job's events to the broker. SIGTERM / SIGINT stop it cleanly.
    Exit codes: 0 stopped (SIGTERM); 130 stopped by Ctrl-C (SIGINT); 2 bad settings (no
    MAM_DISPATCH_SECRET, insecure broker);
    3 broker unavailable; 4 a runner of that name (or a node) already runs in this workspace, or the
    name is online elsewhere on this broker.
    """
    return serve(app, name, once=once, max_jobs=max_jobs, idle_exit=idle_exit, allow_insecure=allow_insecure_broker)
