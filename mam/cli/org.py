"""`mam role add|list|show|reset|remove` and `mam task add|list|show|done|reopen|cancel` (mam/org; docs/org.md)."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import closing, contextmanager
from typing import TYPE_CHECKING, Any

import click

from mam.cli.common import (
    App,
    brief_options,
    echo,
    echo_json,
    open_registry,
    read_brief,
    warn_once,
    workspace_option,
)
from mam.errors import UsageError
from mam.protocol import Invalid

if TYPE_CHECKING:
    from mam.store.registry import Registry

ROLE_HELP = """Roles: who does the workspace's tasks, played by a session, and whom each reports to.

\b
A role is played by one session (one job at a time, as always); its tasks wait their turn
in creation order. --reports-to makes the chain of command each task's brief names (a role
that reports to no one leads). --daily-runs N: at most N task jobs of the role per local day
(MAM_ORG_DAILY_RUNS caps the whole workspace). --breaker N (default 3): N failed jobs in a row
trip the role's circuit breaker, and its tasks wait (queued_for breaker) until `mam role reset`.

\b
Exit codes: 0 ok; 2 a bad name or option, or `add` of a role that exists (nothing written);
5 no such role or session, or `remove` of a role with tasks left to do or roles reporting to it.
"""

TASK_HELP = """Tasks: work that outlives one job, woken by the node on its role's session.

\b
A task is `todo` until nothing holds it, then the node starts it as a job on its role's
session (`running`); `queued_for` says what holds it: blockers (a --blocked-by task is not
done), busy (its session has a job), daily_cap, breaker (its role's breaker tripped), hold
(`mam pause --all`). When its job completes, the agent's disposition moves it: done, blocked
(`--waiting-on` another task: woken once that one is done) or in_review (until `mam task
done` or `reopen`); a job that ends otherwise makes it failed, and counts for the breaker.
Each wake is recorded with its reason: assigned, blockers_resolved, reopened, unblocked.
`add`, `done`, `reopen` and `role reset` start the node (unless MAM_NODE=0 or MAM_NO_AUTOSTART=1).

\b
Exit codes: 0 ok; 2 a bad id, title, brief or option (nothing written); 5 no such task or
role, or a task not in a state that allows it (done while running, reopen of a todo task).
"""


@click.group("role", help=ROLE_HELP)
def role() -> None:
    pass


@click.group("task", help=TASK_HELP)
def task() -> None:
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
    """`op` through the node (started when the operation starts one): its answer; a warning when it ran here."""
    from mam.node.call import answer, call

    def said(frame: dict[str, Any]) -> None:
        if "warning" in frame:
            warn_once(str(frame["warning"]))

    try:
        final = call(app.ws.root, op, args, on_frame=said)
    except Invalid as e:
        raise UsageError(str(e)) from None
    out = answer(final)
    if final.get("here"):
        echo(
            "mam: warning: no node ran this command (MAM_NODE=0, MAM_NO_AUTOSTART=1 or none running): tasks are "
            "woken only by a node; start one with `mam node`",
            err=True,
        )
    return out


# -- roles --------------------------------------------------------------------------------------------
def _role_line(r: dict[str, Any]) -> str:
    b = r["breaker"]
    breaker = (
        f"TRIPPED ({b['failures']} failed: mam role reset {r['name']})"
        if b["tripped"]
        else (f"{b['failures']}/{b['threshold']} failed")
    )
    cap = f"{r['runs_today']}/{r['daily_runs']}" if r["daily_runs"] is not None else f"{r['runs_today']}/-"
    return (
        f"{r['name']:<16} {r['session']:<16} reports to {r['reports_to'] or '-':<12} runs today {cap:<8} "
        f"breaker {breaker}"
    )


@role.command("add")
@workspace_option
@click.argument("name")
@click.option("--session", required=True, help="The session that plays the role (a session of this workspace).")
@click.option("--reports-to", default=None, metavar="ROLE", help="The role it reports to (default: no one).")
@click.option("--daily-runs", type=int, default=None, metavar="N", help="At most N task jobs per local day.")
@click.option("--breaker", type=int, default=None, metavar="N", help="Trip after N failed jobs in a row (default 3).")
@click.option("--json", "as_json", is_flag=True, help="Print the role as JSON.")
@click.pass_obj
def role_add(
    app: App, name: str, session: str, reports_to: str | None, daily_runs: int | None, breaker: int | None,
    as_json: bool,
) -> None:  # fmt: skip
    """Add role NAME, played by --session. Exit codes: 0; 2 a bad name or option, or NAME exists; 5 no such
    session or --reports-to role."""
    from mam.org.manage import add_role, check_role

    check_role(name, session=session, reports_to=reports_to, daily_runs=daily_runs, breaker=breaker)  # writes nothing
    with closing(open_registry(app)) as registry:
        out = add_role(registry, name, session=session, reports_to=reports_to, daily_runs=daily_runs, breaker=breaker)
    if as_json:
        echo_json(out)
    else:
        echo(_role_line(out))


@role.command("list")
@workspace_option
@click.option("--json", "as_json", is_flag=True, help="Print a JSON list of roles.")
@click.pass_obj
def role_list(app: App, as_json: bool) -> None:
    """List the roles: session, whom each reports to, runs today, breaker. Looking starts nothing. Exit 0."""
    from mam.org.manage import list_roles

    with _looking(app) as registry:
        rows = list_roles(registry)
    if as_json:
        echo_json(rows)
        return
    if not rows:
        echo("no roles")
    for r in rows:
        echo(_role_line(r))


@role.command("show")
@workspace_option
@click.argument("name")
@click.option("--json", "as_json", is_flag=True, help="Print the role as JSON.")
@click.pass_obj
def role_show(app: App, name: str, as_json: bool) -> None:
    """Show role NAME: its session, chain of command, daily runs and breaker. Exit codes: 0; 2; 5 no such role."""
    from mam.org.manage import show_role

    with _looking(app) as registry:
        out = show_role(registry, name)
    if as_json:
        echo_json(out)
        return
    echo(_role_line(out))
    echo(f"chain of command: {' -> '.join([out['name'], *out['chain']])}")
    if out["reports"]:
        echo(f"reporting to it: {', '.join(out['reports'])}")
    echo("tasks: " + ", ".join(f"{n} {state}" for state, n in out["tasks"].items() if n) or "tasks: none")


@role.command("reset")
@workspace_option
@click.argument("name")
@click.option("--json", "as_json", is_flag=True, help="Print the role as JSON.")
@click.pass_obj
def role_reset(app: App, name: str, as_json: bool) -> None:
    """Close NAME's circuit breaker (its failures counted from 0): its tasks run again.
    Exit codes: 0; 2 a bad name; 5 no such role."""
    from mam.org.manage import check_role_name

    out = _run(app, "role_reset", {"role": check_role_name(name)})
    if as_json:
        echo_json(out)
    else:
        echo(f"role {name}: breaker reset; its tasks run again")


@role.command("remove")
@workspace_option
@click.argument("name")
@click.pass_obj
def role_remove(app: App, name: str) -> None:
    """Remove role NAME (its ended tasks stay). Exit codes: 0; 2 a bad name; 5 no such role, tasks of it left to
    do, or roles reporting to it."""
    from mam.org.manage import check_role_name, remove_role

    check_role_name(name)
    with closing(open_registry(app)) as registry:
        remove_role(registry, name)
    echo(f"role {name} removed")


# -- tasks --------------------------------------------------------------------------------------------
def _task_line(t: dict[str, Any]) -> str:
    what = (
        t["state"]
        + (f" ({t['queued_for']})" if t["queued_for"] else "")
        + (f" (waiting on {t['wait']})" if t["wait"] else "")
    )
    indent = "  " * int(t.get("depth") or 0)
    blockers = f"  blocked by {','.join(t['blocked_by'])}" if t["blocked_by"] else ""
    return f"{t['id']:<8} {what:<24} {t['role']:<14} {t['job'] or '-':<12} {indent}{t['title']}{blockers}"


@task.command("add")
@workspace_option
@click.argument("title")
@click.option("--role", "role_name", required=True, help="The role that does it.")
@brief_options
@click.option("--blocked-by", default=None, metavar="ID[,ID...]", help="Tasks that must be done before it runs.")
@click.option("--parent", default=None, metavar="ID", help="The task it is part of.")
@click.option(
    "--idempotency-key",
    default=None,
    metavar="K",
    help="If a task with this key exists, print its id (the same title, role, brief and blockers only: else exit 2).",
)
@click.option("--json", "as_json", is_flag=True, help="Print the task as JSON (its id in `id`).")
@click.pass_obj
def task_add(
    app: App, title: str, role_name: str, brief: str | None, brief_file: str | None, blocked_by: str | None,
    parent: str | None, idempotency_key: str | None, as_json: bool,
) -> None:  # fmt: skip
    """Add task TITLE for --role; print its id. The node starts it once nothing holds it.
    Exit codes: 0; 2 a bad title, brief, id or option (nothing written); 5 no such role or task."""
    from mam.org.manage import TaskSpec, checked, split_ids

    if brief is not None and brief_file is not None:
        raise UsageError("give at most one of --brief or --brief-file")
    text = brief if brief_file is None else read_brief(brief_file)
    spec = checked(TaskSpec(title, role_name, text, split_ids(blocked_by), parent, idempotency_key))
    args = {
        "title": spec.title,
        "role": spec.role,
        "brief": spec.brief,
        "blocked_by": list(spec.blocked_by) or None,
        "parent": spec.parent,
        "idempotency_key": spec.idempotency_key,
    }
    out = _run(app, "task_add", {k: v for k, v in args.items() if v is not None})
    if as_json:
        echo_json(out)
    else:
        echo(out["id"])


@task.command("list")
@workspace_option
@click.option("--json", "as_json", is_flag=True, help="Print a JSON list of tasks, each parent before its subtasks.")
@click.pass_obj
def task_list(app: App, as_json: bool) -> None:
    """List the tasks as a tree by parent: state (and what holds a todo one), role, job, title.
    Looking starts nothing. Exit 0."""
    from mam.org.manage import list_tasks

    with _looking(app) as registry:
        rows = list_tasks(registry, app.settings)
    if as_json:
        echo_json(rows)
        return
    if not rows:
        echo("no tasks")
    for t in rows:
        echo(_task_line(t))


@task.command("show")
@workspace_option
@click.argument("task_id", metavar="ID")
@click.option("--json", "as_json", is_flag=True, help="Print the task as JSON.")
@click.pass_obj
def task_show(app: App, task_id: str, as_json: bool) -> None:
    """Show task ID: its state, what holds it, its jobs and each wake's reason. Exit codes: 0; 2; 5 no such task."""
    from mam.org.manage import show_task

    with _looking(app) as registry:
        out = show_task(registry, task_id, app.settings)
    if as_json:
        echo_json(out)
        return
    echo(_task_line(out))
    if out["parent"]:
        echo(f"part of {out['parent']}")
    for w in out["wakes"]:
        ended = ""
        if w["outcome"]:
            ended = f" -> {w['outcome']}" + (f", task {w['task_state']}" if w["task_state"] else "")
        detail = f" ({w['detail']})" if w["detail"] else ""
        echo(f"  {w['job']}: woken {w['reason']} on {w['session']}{ended}{detail}")


def _changed(app: App, op: str, task_id: str, verb: str, **extra: Any) -> None:
    from mam.org.manage import check_task_id

    out = _run(app, op, {"task": check_task_id(task_id), **extra})
    echo(f"task {task_id}: {verb}, now {out['state']}")


@task.command("done")
@workspace_option
@click.argument("task_id", metavar="ID")
@click.pass_obj
def task_done(app: App, task_id: str) -> None:
    """Mark task ID done (from review, or by hand): the tasks it blocks may run.
    Exit codes: 0; 2 a bad id; 5 no such task, or it is running or cancelled."""
    _changed(app, "task_done", task_id, "marked done")


@task.command("reopen")
@workspace_option
@click.argument("task_id", metavar="ID")
@click.option("--note", default=None, help="A note its next run's brief carries.")
@click.pass_obj
def task_reopen(app: App, task_id: str, note: str | None) -> None:
    """Reopen task ID (in review, blocked, done, failed or cancelled): it is woken again (reason reopened).
    Exit codes: 0; 2 a bad id or note; 5 no such task, or it is todo or running."""
    _changed(app, "task_reopen", task_id, "reopened", **({"note": note} if note is not None else {}))


@task.command("cancel")
@workspace_option
@click.argument("task_id", metavar="ID")
@click.pass_obj
def task_cancel(app: App, task_id: str) -> None:
    """Cancel task ID, and its job if it runs one. Exit codes: 0; 2 a bad id; 5 no such task, or it is done."""
    _changed(app, "task_cancel", task_id, "cancelled")
