"""`mam routine add|list|log|pause|resume|remove|run` (mam/routines; docs/routines.md)."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import closing, contextmanager
from typing import TYPE_CHECKING, Any

import click

from mam.cli.common import App, echo, echo_json, open_registry, read_brief, workspace_option
from mam.cli.request_options import field_options
from mam.errors import UsageError
from mam.outcomes import Exit
from mam.protocol import ROUTINE_ADD, Invalid

if TYPE_CHECKING:
    from mam.store.registry import Registry

ROUTINE_HELP = """Routines: delegations the workspace's node fires on a schedule, on demand or on a webhook.

\b
Each tick is an ordinary delegation (`mam job delegate`) with the idempotency key
routine:NAME:TIME (UTC), so a tick never fires twice, whatever restarts. Every tick leaves a
receipt (`mam routine log NAME`): when it was due, when it fired, its job and outcome, or why it
was skipped: active (the routine's last job is still open), paused, hold (`mam pause --all`),
budget (a token budget would refuse the job), missed (the node was not running).
`add`, `resume` and `run` start the node (unless MAM_NODE=0 or MAM_NO_AUTOSTART=1); a node with an
enabled routine does not end for idleness (`mam node stop` ends it).

\b
Exit codes: 0 ok; 1 `run`: no node decided the tick in time (nothing fired);
2 bad name, option, schedule or brief (nothing written), or `add` of a name that exists;
5 no such routine.
"""

ADD_HELP = """Add routine NAME: delegate the brief to TARGET on each tick.

\b
Triggers (at least one): --every 30s|10m|2h|1d (from now), --cron "MIN HOUR DOM MON DOW" in
--tz ZONE (default UTC), and --on-webhook: prints a loopback URL and a secret (shown once);
a POST signed with it fires one tick (see docs/routines.md).

\b
--concurrency, when the routine's last job is still open at a tick:
  skip      (default) the tick is skipped (reason active)
  coalesce  it is skipped, and one tick fires once the open job ends
  queue     it is delegated anyway and waits its turn behind the open job
--catch-up, for the ticks missed while no node ran:
  skip      (default) none fires    once   the latest fires    all:N   the N oldest fire

\b
Exit codes: 0 added; 2 a bad option, or the name exists (nothing written).
"""


@click.group("routine", help=ROUTINE_HELP)
def routine() -> None:
    pass


@contextmanager
def _looking(app: App) -> Iterator[Registry | None]:
    """The registry if the workspace has one (looking creates nothing), closed after."""
    from mam.store.registry import Registry

    registry = Registry.open_existing(app.ws)
    try:
        yield registry
    finally:
        if registry is not None:
            registry.close()


def _run(app: App, op: str, args: dict[str, Any]) -> Any:
    """`op` through the node (started when none runs): its answer; a warning when it ran here instead."""
    from mam.node.call import answer, call

    try:
        final = call(app.ws.root, op, args)
    except Invalid as e:
        raise UsageError(str(e)) from None
    out = answer(final)
    if final.get("here"):
        echo(
            "mam: warning: no node ran this command (MAM_NODE=0 or MAM_NO_AUTOSTART=1): routines fire only in "
            "a node; start one with `mam node`",
            err=True,
        )
    return out


@routine.command("add", help=ADD_HELP)
@workspace_option
@click.argument("name")
@field_options(ROUTINE_ADD, skip=("name",))
@click.option("--json", "as_json", is_flag=True, help="Print the routine as JSON (with the secret, if any).")
@click.pass_obj
def add(app: App, /, name: str, brief: str | None, brief_file: str | None, as_json: bool, **options: Any) -> None:
    from mam.routines.manage import Spec, check_routine_name, checked

    check_routine_name(name)
    if (brief is None) == (brief_file is None):
        raise UsageError("give exactly one of --brief or --brief-file")
    text = brief if brief is not None else read_brief(str(brief_file))
    checked(Spec(name=name, brief=text, **options))  # here first: a bad option starts no node
    out = _run(app, "routine_add", {"name": name, "brief": text, **options})
    if as_json:
        echo_json(out)
    else:
        echo(f"routine {name}: {out['schedule']}, next tick {out['next_tick'] or '-'}")
        if out.get("secret"):
            echo(f"webhook: POST {out['url']}")
            echo(f"secret (shown once): {out['secret']}")


@routine.command("list")
@workspace_option
@click.option("--json", "as_json", is_flag=True, help="Print a JSON list of routines.")
@click.pass_obj
def list_(app: App, as_json: bool) -> None:
    """List the routines, one row each under a header: NAME, STATE, SCHEDULE, NEXT (tick), CONCURRENCY (what a
    tick does while the routine's last job is still open: skip, coalesce, queue), CATCH-UP (the ticks missed
    while no node ran: skip, once, all:N; see `mam routine --help`), LAST (receipt) and TARGET. Looking starts
    nothing. Exit 0."""
    from mam.cli.tables import table
    from mam.routines.manage import list_routines

    with _looking(app) as registry:
        rows = list_routines(registry)
    if as_json:
        echo_json(rows)
        return
    if not rows:
        echo("no routines")
        return
    header = ("NAME", "STATE", "SCHEDULE", "NEXT", "CONCURRENCY", "CATCH-UP", "LAST", "TARGET")
    cells = []
    for r in rows:
        last = r["last"]
        shown = "-" if last is None else f"{last['status']} {last['reason'] or last['outcome'] or ''}".strip()
        cells.append(
            (r["name"], r["state"], r["schedule"], r["next_tick"] or "-", r["concurrency"], r["catch_up"], shown,
             r["target"])
        )  # fmt: skip
    lines = table(header, cells).splitlines()
    echo(lines[0])
    for r, line in zip(rows, lines[1:]):
        echo(line)
        if r.get("webhook_down"):
            echo(f"  webhook DOWN ({r['url']}): {r['webhook_down']}")


@routine.command("log")
@workspace_option
@click.argument("name")
@click.option("--limit", type=int, default=20, show_default=True, help="Show the last N receipts.")
@click.option("--json", "as_json", is_flag=True, help="Print a JSON list of receipts, newest first.")
@click.pass_obj
def log(app: App, name: str, limit: int, as_json: bool) -> None:
    """Show NAME's receipts, newest first: when each tick was due and fired, its job and outcome, or why it
    was skipped. Exit codes: 0; 2 bad name or --limit; 5 no such routine."""
    from mam.routines.manage import log as routine_log

    with _looking(app) as registry:
        rows = routine_log(registry, name, limit=limit)
    if as_json:
        echo_json(rows)
        return
    for t in rows:
        what = t["outcome"] or t["reason"] or ""
        echo(
            f"{t['scheduled']}  {t['trigger']:<8} {t['status']:<8} {what:<12} {t['job'] or '-'}"
            + (f"  ({t['detail']})" if t["detail"] else "")
        )


def _state_change(app: App, name: str, paused: bool, as_json: bool) -> None:
    from mam.routines.manage import check_routine_name, set_paused

    check_routine_name(name)
    with closing(open_registry(app)) as registry:
        out = set_paused(registry, name, paused)
    _shown_state(name, out, as_json)


def _shown_state(name: str, out: dict[str, Any], as_json: bool) -> None:
    if as_json:
        echo_json(out)
    else:
        echo(f"routine {name}: {out['state']}" + (f", next tick {out['next_tick']}" if out["next_tick"] else ""))


@routine.command("pause")
@workspace_option
@click.argument("name")
@click.option("--json", "as_json", is_flag=True, help="Print the routine as JSON.")
@click.pass_obj
def pause(app: App, name: str, as_json: bool) -> None:
    """Pause NAME: its ticks are skipped (reason paused) until resumed. Exit codes: 0; 2; 5 no such routine."""
    _state_change(app, name, True, as_json)


@routine.command("resume")
@workspace_option
@click.argument("name")
@click.option("--json", "as_json", is_flag=True, help="Print the routine as JSON.")
@click.pass_obj
def resume(app: App, name: str, as_json: bool) -> None:
    """Resume NAME from its next tick after now (the paused ones are not caught up). Exit codes: 0; 2; 5."""
    from mam.routines.manage import check_routine_name

    out = _run(app, "routine_resume", {"name": check_routine_name(name)})
    _shown_state(name, out, as_json)


@routine.command("remove")
@workspace_option
@click.argument("name")
@click.pass_obj
def remove(app: App, name: str) -> None:
    """Remove NAME and its receipts; a job it fired runs on to its end. Exit codes: 0; 2; 5 no such routine."""
    from mam.routines.manage import check_routine_name
    from mam.routines.manage import remove as remove_routine

    check_routine_name(name)
    with closing(open_registry(app)) as registry:
        remove_routine(registry, name)
    echo(f"routine {name} removed")


@routine.command("run")
@workspace_option
@click.argument("name")
@click.option("--wait", "wait_s", type=float, default=30.0, show_default=True, help="Seconds to wait for the node.")
@click.option("--json", "as_json", is_flag=True, help="Print the tick's receipt as JSON.")
@click.pass_obj
def run(app: App, name: str, wait_s: float, as_json: bool) -> int:
    """Fire one tick of NAME now, as the node decides any tick (paused, hold, concurrency, budget).

    \b
    Prints the receipt once the node decided it: its job id (it runs on; follow it with
    `mam job wait ID`), or why it was skipped. Exit codes: 0 decided (fired or skipped); 1 no node
    decided it within --wait (it is withdrawn: nothing fired); 2 bad name; 5 no such routine.
    """
    from mam.routines.manage import check_routine_name

    check_routine_name(name)  # before anything: a bad name writes nothing
    out = _run(app, "routine_run", {"name": name, "wait_s": wait_s})
    if as_json:
        echo_json(out)
    elif out is not None:
        what = f"job {out['job']}" if out["job"] else f"{out['status']} ({out['reason']}: {out['detail']})"
        echo(f"routine {name}: tick {out['n']}: {what}")
    return Exit.OK
