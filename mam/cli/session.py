"""`mam session create|fork|stop|resume|status|onboard-orchestrator|attach`."""

from __future__ import annotations

import os
import shlex
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import asdict
from typing import TYPE_CHECKING, Any, TypeVar

import click

from mam.cli.common import App, echo, echo_json, open_registry, workspace_option
from mam.cli.request_options import field_options
from mam.errors import UsageError
from mam.ids import check_name
from mam.node.live import LiveLine
from mam.sessions.options import CREATE

if TYPE_CHECKING:
    from mam.sessions.create import Created
    from mam.store.registry import Registry
    from mam.store.sessions import SessionRow

T = TypeVar("T")


@contextmanager
def registry_of(app: App) -> Iterator[Any]:
    """The workspace's registry, closed on the way out: the last connection to close folds SQLite's
    WAL back into the database, so a later read-only look (status) finds nothing left to write."""
    registry = open_registry(app)
    try:
        yield registry
    finally:
        registry.close()


def one_name(name: str | None, session_opt: str | None, command: str) -> str:
    """The session a command names, as NAME or as --session NAME (either, once)."""
    if (name is None) == (session_opt is None):
        raise UsageError(f"give the session's name once: `mam session {command} NAME` (or --session NAME)")
    return name or session_opt or ""


@click.group("session")
def session() -> None:
    """Agent sessions: one long-lived agent per pane, recorded in .mam/agent-sessions.db."""


@session.command("create")
@workspace_option
@field_options(CREATE)
@click.option("--json", "as_json", is_flag=True, help="Print the session row as JSON.")
@click.pass_obj
def create(
    app: App,
    agent: str,
    role: str,
    name: str,
    backend: str | None,
    server: str | None,
    herdr_session: str | None,
    cwd: str | None,
    permissions: str,
    board: bool,
    no_trust: bool,
    token_budget: int,
    onboard: bool,
    onboard_timeout: float | None,
    worktree: bool,
    branch: str | None,
    base: str | None,
    as_json: bool,
) -> int:
    """Start AGENT in a new pane and register it as session NAME.

    With --worktree the agent works in its own git worktree, .mam/worktrees/NAME/, on a new
    branch (--branch, default mam/NAME) made from --base (default HEAD); the row records
    worktree, branch, base and base_commit. `mam session remove` gives them back.

    \b
    The agent's program must be on PATH (checked before anything starts). With --onboard,
    the onboarding job's progress is shown on stderr (a live line on a terminal) and its
    outcome printed once.

    \b
    Exit codes: 0 created; 44 onboarding failed; 45 onboarding did not end in time
    (the session is kept in both cases); 5 refused: a session of that name exists (running or
    stopped: resume it, or remove it to free the name); 1 creation failed (also: the agent
    exited while starting, or showed a trust dialog or a permission prompt; nothing is left
    behind); 2 bad options (also: --worktree outside git, a branch that exists, a base that is not a
    commit), or the agent's program is not on PATH.
    """
    from mam.sessions.create import start_session

    live = LiveLine() if onboard and not as_json and sys.stderr.isatty() else None

    def onboarding(job_id: str, budget_s: float) -> None:
        echo(
            f"session {name}: started; onboarding job {job_id}: waiting for the agent to report (up to {budget_s:g} s)",
            err=True,
        )

    then: Callable[[SessionRow, Registry], Created] | None = None
    if onboard:
        from mam.onboarding import onboarder  # the job machinery: imported only when onboarding

        then = onboarder(
            ws=app.ws,
            settings=app.settings,
            timeout=onboard_timeout,
            on_job=onboarding,
            on_progress=live.update if live is not None else None,
        )
    try:
        made = start_session(
            name=name,
            agent=agent,
            role=role,
            ws=app.ws,
            settings=app.settings,
            registry_of=lambda: open_registry(app),
            environ=os.environ,
            backend=backend,
            server=server,
            herdr_session=herdr_session,
            cwd=cwd,
            permissions=permissions,
            trust=not no_trust,
            token_budget=token_budget,
            board=board,
            worktree=worktree,
            branch=branch,
            base=base,
            then=then,
        )
    finally:
        if live is not None:
            live.stop()
    row, code = made.row, made.exit_code
    if made.onboarding is not None and not as_json:
        from mam.onboarding import onboarding_line

        echo(onboarding_line(made.onboarding))
    if as_json:
        echo_json(row.as_dict())
    else:
        branch = f", branch {row.branch} from {row.base} ({row.base_commit[:12]})" if row.worktree else ""
        echo(
            f"session {row.name}: {row.agent} ({row.role}) running in {row.backend}:{row.server} pane {row.pane_id}, "
            f"cwd {row.cwd}{branch}"
        )
    return code


@session.command("fork")
@workspace_option
@click.argument("source", metavar="SRC")
@click.option("--session", "name", required=True, help="Name of the new session (letters, digits, . _ -).")
@click.option("--role", default=None, help="Role of the new session (default: SRC's role).")
@click.option("--by", default=None, help="Who asks, for the audit log (default: user@host).")
@click.option("--json", "as_json", is_flag=True, help="Print the new session's row as JSON.")
@click.pass_obj
def fork(app: App, source: str, name: str, role: str | None, by: str | None, as_json: bool) -> None:
    """Start session NEW (--session) from a copy of session SRC's conversation.

    The new session runs SRC's agent in SRC's cwd with SRC's permissions and backend; its
    conversation gets a new id and starts with every message of SRC's. claude, codex, grok and
    opencode fork with their own option (claude --resume ID --fork-session, codex fork ID, grok
    --resume ID --fork-session, opencode --session ID --fork); the demo agent's conversation
    file, gemini's transcripts and hermes' rows are copied under the new id and resumed. agy
    cannot be forked (docs/agents.md says why). SRC is left as it is, running or not.
    The fork is recorded (`forked_from` in `status --json`) and audited with --by in
    .mam/session-audit.jsonl.

    \b
    Exit codes: 0 forked; 1 session SRC has no conversation yet, or the launch failed (nothing is left
    behind); 2 a bad name, or SRC's agent cannot fork; 5 no session SRC, or refused: the name NEW
    is taken.
    """
    from mam.sessions.fork import fork_session

    row = fork_session(
        source,
        name=name,
        role=role,
        by=by,
        ws=app.ws,
        settings=app.settings,
        registry_of=lambda: open_registry(app),
        environ=os.environ,
    )
    if as_json:
        echo_json(row.as_dict())
    else:
        click.echo(
            f"session {row.name}: forked from {source}, {row.agent} ({row.role}) running in "
            f"{row.backend}:{row.server} pane {row.pane_id}, conversation {row.conversation_id or '-'}"
        )


@session.command("stop")
@workspace_option
@click.argument("name", required=False)
@click.option("--session", "session_opt", default=None, help="The session to stop (instead of NAME).")
@click.option("--purge-conversation", is_flag=True, help="Also delete the conversation's files (needs --yes).")
@click.option("--yes", is_flag=True, help="Confirm --purge-conversation.")
@click.option("--json", "as_json", is_flag=True, help="Print the session row as JSON.")
@click.pass_obj
def stop(
    app: App, name: str | None, session_opt: str | None, purge_conversation: bool, yes: bool, as_json: bool
) -> None:
    """Exit session NAME's agent gracefully; the conversation id is kept (status stopped, resumable true).

    Exit codes: 0 stopped (or already stopped); 5 unknown session; 2 --purge-conversation without --yes,
    or no name (or two).
    """
    from mam.sessions.stop import stop_session

    name = one_name(name, session_opt, "stop")
    check_name(name)  # before registry_of creates anything
    with registry_of(app) as registry:
        row = stop_session(
            name, ws=app.ws, settings=app.settings, registry=registry, purge_conversation=purge_conversation, yes=yes
        )
    if as_json:
        echo_json(row.as_dict())
    else:
        echo(
            f"session {row.name}: stopped, conversation {row.conversation_id or '-'}, resumable "
            f"{str(row.resumable).lower()}"
        )


@session.command("remove")
@workspace_option
@click.argument("name", required=False)
@click.option("--session", "session_opt", default=None, help="The session (instead of NAME).")
@click.option("--force", is_flag=True, help="Stop a running session first; remove a worktree with uncommitted changes.")
@click.option("--purge-conversation", is_flag=True, help="Also delete the conversation's files (needs --yes).")
@click.option("--yes", is_flag=True, help="Confirm --purge-conversation.")
@click.option("--json", "as_json", is_flag=True, help="Print what was removed as JSON.")
@click.pass_obj
def remove(
    app: App, name: str | None, session_opt: str | None, force: bool, purge_conversation: bool, yes: bool, as_json: bool
) -> None:
    """Remove session NAME from the registry and its mirror, so the name is free for `session create`.

    A stopped or terminated session is removed; its jobs and their logs are kept. A running
    one is refused unless --force, which stops it first. A session made with --worktree:
    its worktree is removed only when clean (--force removes it anyway, the changes are lost);
    its branch is deleted only when every commit on it is in its base, else it is kept and
    the output says so (even with --force).

    \b
    Exit codes: 0 removed; 5 unknown session, or refused: it is running (without --force),
    or its worktree has uncommitted changes (without --force); 2 bad options
    (--purge-conversation without --yes); 1 the pane backend, git or the registry failed.
    """
    from mam.sessions.remove import check_request as check_remove
    from mam.sessions.remove import remove_session

    if (name is None) == (session_opt is None):
        raise UsageError("give the session's name once: `mam session remove NAME`")
    name = name or session_opt or ""
    check_remove(name, purge_conversation=purge_conversation, yes=yes)  # before registry_of creates anything
    with registry_of(app) as registry:
        done = remove_session(
            name,
            ws=app.ws,
            settings=app.settings,
            registry=registry,
            environ=os.environ,
            force=force,
            purge_conversation=purge_conversation,
            yes=yes,
        )
    if as_json:
        echo_json(done.as_dict())
        return
    what = "stopped and removed" if done.stopped else "removed"
    echo(f"session {name}: {what}" + (f"; conversation {done.row.conversation_id} purged" if done.purged else ""))
    if done.worktree is not None:
        echo(f"  {done.worktree.message}")


@session.command("resume")
@workspace_option
@click.argument("name", required=False)
@click.option("--session", "session_opt", default=None, help="The session to resume (instead of NAME).")
@click.option("--json", "as_json", is_flag=True, help="Print the session row as JSON.")
@click.pass_obj
def resume(app: App, name: str | None, session_opt: str | None, as_json: bool) -> None:
    """Relaunch stopped session NAME's conversation in the folder it ran in.

    Exit codes: 0 resumed; 1 already running, or the conversation is gone; 5 unknown session,
    or its worktree (--worktree) is gone or on another branch; 2 no name (or two).
    """
    from mam.sessions.resume import resume_session

    name = one_name(name, session_opt, "resume")
    check_name(name)  # before registry_of creates anything
    with registry_of(app) as registry:
        row = resume_session(name, ws=app.ws, settings=app.settings, registry=registry, environ=os.environ)
    if as_json:
        echo_json(row.as_dict())
    else:
        echo(f"session {row.name}: resumed conversation {row.conversation_id} in pane {row.pane_id}, cwd {row.cwd}")


@session.command("status")
@workspace_option
@click.option("--json", "as_json", is_flag=True, help="Print a JSON list, one object per session (or node).")
@click.option(
    "--fleet",
    is_flag=True,
    help="Every node seen on the broker instead: name, host, online/offline since when, last seen, "
    "its sessions and open jobs (from this workspace's named node, else heard on the broker for 4 s).",
)
@click.pass_obj
def status(app: App, as_json: bool, fleet: bool) -> None:
    """Read-only snapshot: registry status, pane liveness, command, cwd, resume id and drift.

    \b
    With --fleet: every node (`mam node --name`, `mam runner`) seen on the broker, one line
    each; a node that died reads offline within 30 s (its last will, or 10 s unheard).
    Never starts a broker, a node, a server or a pane. While the workspace is held (`mam pause
    --all`), a first line says who placed the hold, since when, and that `mam resume --all`
    releases it.
    Exit codes: 0 printed; 2 --fleet without MAM_DISPATCH_SECRET; 3 --fleet and no broker answers.
    """
    from mam.sessions.status import session_status

    if fleet:
        from mam.cli.fleet import show_fleet

        show_fleet(app, as_json)
        return
    rows = session_status(ws=app.ws, settings=app.settings)
    _say_webhook_down(app)
    if as_json:
        echo_json(rows)
        return
    _say_hold(app)
    if not rows:
        echo("no sessions")
        return
    header = ("NAME", "AGENT", "ROLE", "STATUS", "PANE", "ALIVE", "CONVERSATION", "DRIFT")
    table = [header] + [
        (
            r["name"],
            r["agent"],
            r["role"],
            r["status"],
            f"{r['backend']}:{r['pane_id'] or '-'}",
            "yes" if r["pane_alive"] else "no",
            (r["conversation_id"] or "-")[:36],
            r["drift"] or "-",
        )
        for r in rows
    ]
    widths = [max(len(str(line[i])) for line in table) for i in range(len(header) - 1)]
    for line in table:
        echo("  ".join(str(v).ljust(w) for v, w in zip(line, widths)) + "  " + str(line[-1]))


def _read(app: App, read: Callable[[Registry], T]) -> T | None:
    """`read` of the workspace's registry, if it has one (None otherwise: nothing is created)."""
    from mam.store.registry import Registry

    registry = Registry.open_existing(app.ws)
    if registry is None:
        return None
    try:
        return read(registry)
    finally:
        registry.close()


def _say_hold(app: App) -> None:
    """A line first while the workspace is held (`mam pause --all`): who placed it, since when, what releases it."""
    from mam.jobs.pause import hold
    from mam.jobs.queries import held_text

    held = _read(app, hold)
    if held is not None:
        echo(held_text(held))


def _say_webhook_down(app: App) -> None:
    """A warning on stderr while the routines' webhook URL does not reach them (their node cannot serve it)."""
    from mam.routines.health import webhook_problem

    problem = _read(app, webhook_problem)
    if problem:
        echo(f"mam: warning: routine webhooks are down: {problem} (mam routine list)", err=True)


@session.command("onboard-orchestrator")
@workspace_option
@click.option(
    "--backend", type=click.Choice(["tmux", "herdr"]), default=None, help="With --pane: the backend of that pane."
)
@click.option("--server", default=None, help="With --pane: its tmux socket name / herdr session.")
@click.option(
    "--pane",
    "pane_id",
    default=None,
    help="The orchestrator's pane id (default: detected from TMUX_PANE / HERDR_PANE_ID).",
)
@click.option("--session-id", default="", help="The orchestrator's own conversation id, if known.")
@click.option("--json", "as_json", is_flag=True, help="Print the record as JSON.")
@click.pass_obj
def onboard_orchestrator(
    app: App, backend: str | None, server: str | None, pane_id: str | None, session_id: str, as_json: bool
) -> None:
    """Record the orchestrator's own pane so the monitor never registers it as a sub-agent. Exit 0."""
    from mam.sessions.orchestrator import onboard_orchestrator as record

    with registry_of(app) as registry:
        row = record(
            registry=registry, environ=os.environ, backend=backend, server=server, pane_id=pane_id, session=session_id
        )
    if as_json:
        echo_json(asdict(row))
    else:
        echo(f"orchestrator pane recorded: {row.key}")


@session.command("attach")
@workspace_option
@click.argument("name", required=False)
@click.option("--session", "session_opt", default=None, help="The session (instead of NAME).")
@click.option("--print", "print_only", is_flag=True, help="Print the commands instead of running them.")
@click.pass_obj
def attach(app: App, name: str | None, session_opt: str | None, print_only: bool) -> None:
    """Put this terminal on session NAME's pane (what Enter does in `mam top`).

    tmux: from a client of the workspace's own tmux server, switch to the pane; from
    anywhere else, attach to that server with the pane selected (detach with the tmux
    prefix, then d). herdr: run herdr's client on the session's herdr session. Starts
    nothing: a session with no live pane is refused (exit 5) with the resume command.
    With --print, prints the commands (one a line, runnable as printed) and exits 0.
    """
    from mam.sessions.attach import attach as attach_session
    from mam.sessions.attach import attach_argv

    name = one_name(name, session_opt, "attach")
    if print_only:
        for argv in attach_argv(name, ws=app.ws, settings=app.settings):
            echo(shlex.join(argv))
        return
    attach_session(name, ws=app.ws, settings=app.settings)
